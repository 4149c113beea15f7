package sha2

import (
	"bytes"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireSame fails unless both sums equal the standard library's for data.
func requireSame(t testing.TB, data []byte) {
	t.Helper()
	require.Equal(t, sha256.Sum256(data), Sum256(data), "SHA-256 of %d bytes", len(data))
	require.Equal(t, sha512.Sum512(data), Sum512(data), "SHA-512 of %d bytes", len(data))
}

// TestSumMatchesCryptoForEveryLength covers every padding case of both block sizes
// several times over: tails that fit one final block, tails that spill into a second
// one, and the exact boundaries between them.
func TestSumMatchesCryptoForEveryLength(t *testing.T) {
	rng := rand.New(rand.NewChaCha8([32]byte{'s', 'h', 'a', '2'}))
	patterns := map[string]func(i int) byte{
		"random": func(int) byte { return byte(rng.Uint32()) },
		"zeros":  func(int) byte { return 0 },
		"ones":   func(int) byte { return 0xff },
		"count":  func(i int) byte { return byte(i % 251) },
		"marker": func(int) byte { return 0x80 },
	}
	for name, fill := range patterns {
		t.Run(name, func(t *testing.T) {
			for n := 0; n <= 600; n++ {
				data := make([]byte, n)
				for i := range data {
					data[i] = fill(i)
				}
				requireSame(t, data)
			}
		})
	}
}

// TestStandardVectors checks the FIPS 180-4 example messages, independently of the
// standard library.
func TestStandardVectors(t *testing.T) {
	const twoBlock256 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
	const twoBlock512 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn" +
		"hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"
	tests := []struct {
		in     string
		sha256 string
		sha512 string
	}{
		{
			in:     "",
			sha256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
			sha512: "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce" +
				"47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e",
		},
		{
			in:     "abc",
			sha256: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
			sha512: "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a" +
				"2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
		},
		{
			in:     twoBlock256,
			sha256: "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
		},
		{
			in: twoBlock512,
			sha512: "8e959b75dae313da8cf4f72814fc143f8f7779c6eb9f7fa17299aeadb6889018" +
				"501d289e4900f7e4331b99dec4b5433ac7d329eeb6dd26545e96e55b874be909",
		},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%.8q", tc.in), func(t *testing.T) {
			if tc.sha256 != "" {
				got := Sum256([]byte(tc.in))
				assert.Equal(t, tc.sha256, hex.EncodeToString(got[:]))
			}
			if tc.sha512 != "" {
				got := Sum512([]byte(tc.in))
				assert.Equal(t, tc.sha512, hex.EncodeToString(got[:]))
			}
		})
	}
}

// TestLargeInputMatchesCrypto runs tens of thousands of blocks through one sum, so a
// state that leaks between blocks or a length field that only works for short input
// shows up.
func TestLargeInputMatchesCrypto(t *testing.T) {
	rng := rand.New(rand.NewChaCha8([32]byte{'b', 'i', 'g'}))
	data := make([]byte, 5<<20+77)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	requireSame(t, data)
	requireSame(t, bytes.Repeat([]byte{'a'}, 3<<20))
}

// TestSumDoesNotModifyInput guards the padding, which must work on a copy of the tail.
func TestSumDoesNotModifyInput(t *testing.T) {
	data := bytes.Repeat([]byte{0x5a}, 300)
	want := bytes.Clone(data)
	Sum256(data[:100])
	Sum512(data[:200])
	require.Equal(t, want, data)
}

// TestConstantsFollowStandardDefinition derives the tables from their definition in
// FIPS 180-4 (fractional parts of square and cube roots of the first primes), so a
// mistyped constant is caught even for inputs no other test happens to exercise.
func TestConstantsFollowStandardDefinition(t *testing.T) {
	primes := firstPrimes(80)
	for i, p := range primes {
		require.Equal(t, fracRoot(p, 3), k512[i], "K512[%d] from cbrt(%d)", i, p)
		if i < 64 {
			require.Equal(t, uint32(k512[i]>>32), k256[i], "K256[%d] from cbrt(%d)", i, p)
		}
	}
	for i, p := range primes[:8] {
		require.Equal(t, fracRoot(p, 2), init512[i], "H512[%d] from sqrt(%d)", i, p)
		require.Equal(t, uint32(init512[i]>>32), init256[i], "H256[%d] from sqrt(%d)", i, p)
	}
}

// fracRoot returns the first 64 bits of the fractional part of p's k-th root:
// floor(root_k(p * 2^(64k))) mod 2^64, with the integer root found by bisection.
func fracRoot(p int64, k int) uint64 {
	target := new(big.Int).Lsh(big.NewInt(p), uint(64*k))
	lo, hi := big.NewInt(0), new(big.Int).Lsh(big.NewInt(1), 72)
	one := big.NewInt(1)
	for new(big.Int).Sub(hi, lo).Cmp(one) > 0 {
		mid := new(big.Int).Rsh(new(big.Int).Add(lo, hi), 1)
		if new(big.Int).Exp(mid, big.NewInt(int64(k)), nil).Cmp(target) <= 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo.Uint64() // Uint64 keeps the low 64 bits, the fractional part.
}

func firstPrimes(n int) []int64 {
	var primes []int64
	for c := int64(2); len(primes) < n; c++ {
		if big.NewInt(c).ProbablyPrime(0) {
			primes = append(primes, c)
		}
	}
	return primes
}

// FuzzSumMatchesCrypto compares both sums with the standard library on arbitrary
// input; the seeds run as part of the normal test.
func FuzzSumMatchesCrypto(f *testing.F) {
	f.Add([]byte(""))
	f.Add([]byte("abc"))
	f.Add(bytes.Repeat([]byte{0x80}, 55))
	f.Add(bytes.Repeat([]byte{0x00}, 56))
	f.Add(bytes.Repeat([]byte{0xff}, 111))
	f.Add(bytes.Repeat([]byte{0x01}, 112))
	f.Add(bytes.Repeat([]byte("cni"), 100))
	f.Fuzz(func(t *testing.T, data []byte) {
		requireSame(t, data)
	})
}

func BenchmarkSum256(b *testing.B) {
	data := make([]byte, 64)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		Sum256(data)
	}
}

func BenchmarkSum512(b *testing.B) {
	data := make([]byte, 64)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		Sum512(data)
	}
}
