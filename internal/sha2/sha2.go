// Package sha2 computes SHA-256 and SHA-512 digests (FIPS 180-4) for deriving names:
// chain, table, ifb and file names that must match the ones the reference plugins
// derive from the same inputs.
//
// It exists only to keep the standard crypto packages out of the binary: linking
// crypto/sha256 or crypto/sha512 pulls in the FIPS 140 module, whose package
// initialisation (self-registration, DRBG, AES-GCM, SHA-3) runs at every plugin exec
// and costs more start-up time than all our hashing put together. This code is plain
// and unhardened (no constant-time guarantees, no assembly): never use it for
// anything secret, for authentication, or anywhere an attacker benefits from a
// collision or a timing difference.
package sha2

import "encoding/binary"

// Sum256 returns the SHA-256 digest of data.
func Sum256(data []byte) [32]byte {
	h := init256
	full := len(data) - len(data)%block256
	blocks256(&h, data[:full])

	// The tail, the 0x80 marker and the 64-bit bit length take one block, or two
	// when the tail leaves fewer than 9 bytes free.
	var last [2 * block256]byte
	n := copy(last[:], data[full:])
	last[n] = 0x80
	end := block256
	if n+1+8 > block256 {
		end = 2 * block256
	}
	binary.BigEndian.PutUint64(last[end-8:end], uint64(len(data))<<3)
	blocks256(&h, last[:end])

	var out [32]byte
	for i, v := range h {
		binary.BigEndian.PutUint32(out[4*i:], v)
	}
	return out
}

// Sum512 returns the SHA-512 digest of data.
func Sum512(data []byte) [64]byte {
	h := init512
	full := len(data) - len(data)%block512
	blocks512(&h, data[:full])

	// As in Sum256, but the length field is 128 bits wide.
	var last [2 * block512]byte
	n := copy(last[:], data[full:])
	last[n] = 0x80
	end := block512
	if n+1+16 > block512 {
		end = 2 * block512
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
