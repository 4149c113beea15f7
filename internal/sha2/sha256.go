package sha2

import (
	"encoding/binary"
	"math/bits"
)

// block256 is SHA-256's message block size in bytes.
const block256 = 64

// init256 is H(0), FIPS 180-4 section 5.3.3.
var init256 = [8]uint32{
	0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
	0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
}

// k256 is K{256}, FIPS 180-4 section 4.2.2.
var k256 = [64]uint32{
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
}

// blocks256 folds every whole 64-byte block of p into h (FIPS 180-4 section 6.2.2).
func blocks256(h *[8]uint32, p []byte) {
	var w [64]uint32
	for ; len(p) >= block256; p = p[block256:] {
		for t := range 16 {
			w[t] = binary.BigEndian.Uint32(p[4*t:])
		}
		for t := 16; t < 64; t++ {
			w[t] = smallSigma1_256(w[t-2]) + w[t-7] + smallSigma0_256(w[t-15]) + w[t-16]
		}
		a, b, c, d, e, f, g, hh := h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]
		for t := range 64 {
			t1 := hh + bigSigma1_256(e) + (e&f ^ ^e&g) + k256[t] + w[t]
			t2 := bigSigma0_256(a) + (a&b ^ a&c ^ b&c)
			hh, g, f, e, d, c, b, a = g, f, e, d+t1, c, b, a, t1+t2
		}
		h[0] += a
		h[1] += b
		h[2] += c
		h[3] += d
		h[4] += e
		h[5] += f
		h[6] += g
		h[7] += hh
	}
}

// rotr32 is ROTR^n on a 32-bit word.
func rotr32(x uint32, n int) uint32 { return bits.RotateLeft32(x, -n) }

func bigSigma0_256(x uint32) uint32   { return rotr32(x, 2) ^ rotr32(x, 13) ^ rotr32(x, 22) }
func bigSigma1_256(x uint32) uint32   { return rotr32(x, 6) ^ rotr32(x, 11) ^ rotr32(x, 25) }
func smallSigma0_256(x uint32) uint32 { return rotr32(x, 7) ^ rotr32(x, 18) ^ x>>3 }
func smallSigma1_256(x uint32) uint32 { return rotr32(x, 17) ^ rotr32(x, 19) ^ x>>10 }
