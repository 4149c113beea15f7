package main

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// Chain, ifb, index-file, backup-file and cnitool container-id names, and the hashed
// forms in rule comments, are digests of their inputs. They were derived with a
// hand-written SHA-256/SHA-512 (internal/sha2) until issue 17 replaced it with
// crypto/sha256 and crypto/sha512, and they exist on nodes: every name must stay byte for
// byte what it was. The name functions did not change, only the digest under them, so the
// digests are compared here with the former implementation, kept below (its padding code
// as it was, its rounds condensed) and used nowhere else. Each package pins a few of its
// own names as golden values derived before the switch (names_test.go).

// TestDigestsMatchTheHandWrittenOnes covers every padding case of both block sizes
// several times over (tails that fit the final block, tails that spill into a second
// one, the exact boundaries), then random inputs up to a few blocks long.
func TestDigestsMatchTheHandWrittenOnes(t *testing.T) {
	rng := rand.New(rand.NewChaCha8([32]byte{'n', 'a', 'm', 'e', 's'}))
	fills := map[string]func(i int) byte{
		"random": func(int) byte { return byte(rng.Uint32()) },
		"zeros":  func(int) byte { return 0 },
		"ones":   func(int) byte { return 0xff },
		"count":  func(i int) byte { return byte(i % 251) },
		"marker": func(int) byte { return 0x80 },
	}
	for name, fill := range fills {
		t.Run(name, func(t *testing.T) {
			for n := 0; n <= 600; n++ {
				data := make([]byte, n)
				for i := range data {
					data[i] = fill(i)
				}
				requireSameDigests(t, data)
			}
		})
	}
	t.Run("random lengths", func(t *testing.T) {
		for range 2000 {
			data := make([]byte, rng.IntN(2048))
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			requireSameDigests(t, data)
		}
	})
	t.Run("large", func(t *testing.T) {
		requireSameDigests(t, bytes.Repeat([]byte("cni"), 1<<20))
	})
}

// FuzzDigestsMatchTheHandWrittenOnes: the same on arbitrary input; the seeds run as
// part of the normal test.
func FuzzDigestsMatchTheHandWrittenOnes(f *testing.F) {
	f.Add([]byte(""))
	f.Add([]byte("mynet0f1e2d3c4b5a69788796a5b4c3d2e1f0"))
	f.Add(bytes.Repeat([]byte{0x80}, 55))
	f.Add(bytes.Repeat([]byte{0x00}, 56))
	f.Add(bytes.Repeat([]byte{0xff}, 111))
	f.Add(bytes.Repeat([]byte{0x01}, 112))
	f.Fuzz(func(t *testing.T, data []byte) {
		requireSameDigests(t, data)
	})
}

func requireSameDigests(t testing.TB, data []byte) {
	t.Helper()
	require.Equal(t, before256(data), sha256.Sum256(data), "SHA-256 of %d bytes", len(data))
	require.Equal(t, before512(data), sha512.Sum512(data), "SHA-512 of %d bytes", len(data))
}

// The former internal/sha2 (FIPS 180-4), the "before" of the comparison.

func before256(data []byte) [32]byte {
	h := [8]uint32{
		0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
	}
	full := len(data) - len(data)%64
	blocks256(&h, data[:full])
	var last [128]byte
	n := copy(last[:], data[full:])
	last[n] = 0x80
	end := 64
	if n+1+8 > 64 {
		end = 128
	}
	binary.BigEndian.PutUint64(last[end-8:end], uint64(len(data))<<3)
	blocks256(&h, last[:end])
	var out [32]byte
	for i, v := range h {
		binary.BigEndian.PutUint32(out[4*i:], v)
	}
	return out
}

func before512(data []byte) [64]byte {
	h := [8]uint64{
		0x6a09e667f3bcc908, 0xbb67ae8584caa73b, 0x3c6ef372fe94f82b, 0xa54ff53a5f1d36f1,
		0x510e527fade682d1, 0x9b05688c2b3e6c1f, 0x1f83d9abfb41bd6b, 0x5be0cd19137e2179,
	}
	full := len(data) - len(data)%128
	blocks512(&h, data[:full])
	var last [256]byte
	n := copy(last[:], data[full:])
	last[n] = 0x80
	end := 128
	if n+1+16 > 128 {
		end = 256
	}
	size := uint64(len(data))
	binary.BigEndian.PutUint64(last[end-16:end-8], size>>61)
	binary.BigEndian.PutUint64(last[end-8:end], size<<3)
	blocks512(&h, last[:end])
	var out [64]byte
	for i, v := range h {
		binary.BigEndian.PutUint64(out[8*i:], v)
	}
	return out
}

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

var k512 = [80]uint64{
	0x428a2f98d728ae22, 0x7137449123ef65cd, 0xb5c0fbcfec4d3b2f, 0xe9b5dba58189dbbc,
	0x3956c25bf348b538, 0x59f111f1b605d019, 0x923f82a4af194f9b, 0xab1c5ed5da6d8118,
	0xd807aa98a3030242, 0x12835b0145706fbe, 0x243185be4ee4b28c, 0x550c7dc3d5ffb4e2,
	0x72be5d74f27b896f, 0x80deb1fe3b1696b1, 0x9bdc06a725c71235, 0xc19bf174cf692694,
	0xe49b69c19ef14ad2, 0xefbe4786384f25e3, 0x0fc19dc68b8cd5b5, 0x240ca1cc77ac9c65,
	0x2de92c6f592b0275, 0x4a7484aa6ea6e483, 0x5cb0a9dcbd41fbd4, 0x76f988da831153b5,
	0x983e5152ee66dfab, 0xa831c66d2db43210, 0xb00327c898fb213f, 0xbf597fc7beef0ee4,
	0xc6e00bf33da88fc2, 0xd5a79147930aa725, 0x06ca6351e003826f, 0x142929670a0e6e70,
	0x27b70a8546d22ffc, 0x2e1b21385c26c926, 0x4d2c6dfc5ac42aed, 0x53380d139d95b3df,
	0x650a73548baf63de, 0x766a0abb3c77b2a8, 0x81c2c92e47edaee6, 0x92722c851482353b,
	0xa2bfe8a14cf10364, 0xa81a664bbc423001, 0xc24b8b70d0f89791, 0xc76c51a30654be30,
	0xd192e819d6ef5218, 0xd69906245565a910, 0xf40e35855771202a, 0x106aa07032bbd1b8,
	0x19a4c116b8d2d0c8, 0x1e376c085141ab53, 0x2748774cdf8eeb99, 0x34b0bcb5e19b48a8,
	0x391c0cb3c5c95a63, 0x4ed8aa4ae3418acb, 0x5b9cca4f7763e373, 0x682e6ff3d6b2b8a3,
	0x748f82ee5defb2fc, 0x78a5636f43172f60, 0x84c87814a1f0ab72, 0x8cc702081a6439ec,
	0x90befffa23631e28, 0xa4506cebde82bde9, 0xbef9a3f7b2c67915, 0xc67178f2e372532b,
	0xca273eceea26619c, 0xd186b8c721c0c207, 0xeada7dd6cde0eb1e, 0xf57d4f7fee6ed178,
	0x06f067aa72176fba, 0x0a637dc5a2c898a6, 0x113f9804bef90dae, 0x1b710b35131c471b,
	0x28db77f523047d84, 0x32caab7b40c72493, 0x3c9ebe0a15c9bebc, 0x431d67c49c100d4c,
	0x4cc5d4becb3e42b6, 0x597f299cfc657e2a, 0x5fcb6fab3ad6faec, 0x6c44198c4a475817,
}

// rounds are a variant's constants and its rotation and shift amounts: Σ0 and Σ1 of the
// compression, σ0 and σ1 of the message schedule (whose third amount is a shift).
type rounds[W uint32 | uint64] struct {
	k              []W
	sum0, sum1     [3]int
	sigma0, sigma1 [3]int
}

var (
	rounds256 = rounds[uint32]{k: k256[:], sum0: [3]int{2, 13, 22}, sum1: [3]int{6, 11, 25},
		sigma0: [3]int{7, 18, 3}, sigma1: [3]int{17, 19, 10}}
	rounds512 = rounds[uint64]{k: k512[:], sum0: [3]int{28, 34, 39}, sum1: [3]int{14, 18, 41},
		sigma0: [3]int{1, 8, 7}, sigma1: [3]int{19, 61, 6}}
)

func blocks256(h *[8]uint32, p []byte) { compress(h, p, rounds256) }

func blocks512(h *[8]uint64, p []byte) { compress(h, p, rounds512) }

// compress runs the rounds on each whole block of p (16 words long) into h.
func compress[W uint32 | uint64](h *[8]W, p []byte, v rounds[W]) {
	size := bits.Len64(uint64(^W(0))) // bits in a word
	r := func(x W, n int) W { return x>>n | x<<(size-n) }
	word := func(b []byte) W {
		if size == 32 {
			return W(binary.BigEndian.Uint32(b))
		}
		return W(binary.BigEndian.Uint64(b))
	}
	block := 16 * size / 8
	w := make([]W, len(v.k))
	for ; len(p) >= block; p = p[block:] {
		for t := range 16 {
			w[t] = word(p[t*size/8:])
		}
		for t := 16; t < len(w); t++ {
			s0 := r(w[t-15], v.sigma0[0]) ^ r(w[t-15], v.sigma0[1]) ^ w[t-15]>>v.sigma0[2]
			s1 := r(w[t-2], v.sigma1[0]) ^ r(w[t-2], v.sigma1[1]) ^ w[t-2]>>v.sigma1[2]
			w[t] = s1 + w[t-7] + s0 + w[t-16]
		}
		a, b, c, d, e, f, g, hh := h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]
		for t := range w {
			t1 := hh + (r(e, v.sum1[0]) ^ r(e, v.sum1[1]) ^ r(e, v.sum1[2])) + (e&f ^ ^e&g) + v.k[t] + w[t]
			t2 := (r(a, v.sum0[0]) ^ r(a, v.sum0[1]) ^ r(a, v.sum0[2])) + (a&b ^ a&c ^ b&c)
			hh, g, f, e, d, c, b, a = g, f, e, d+t1, c, b, a, t1+t2
		}
		for i, x := range [8]W{a, b, c, d, e, f, g, hh} {
			h[i] += x
		}
	}
}
