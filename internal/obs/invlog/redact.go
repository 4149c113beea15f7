package invlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"slices"
	"strings"
)

// Redacted replaces a value the log must not hold.
const Redacted = "[redacted]"

// knownArg reports whether k is a CNI_ARGS key that runtimes send with a name or an id,
// never a secret, and which operators search by: its value is always kept.
func knownArg(k string) bool {
	return slices.Contains([]string{"IgnoreUnknown", "K8S_POD_NAMESPACE", "K8S_POD_NAME", "K8S_POD_INFRA_CONTAINER_ID",
		"K8S_POD_UID", "IP", "MAC", "GATEWAY"}, k)
}

// RedactCNIArgs splits CNI_ARGS ("K=V;K2=V2") into a map with every value that could be
// a credential replaced by Redacted: the value of a key that names one (token, secret,
// password, ...) or a value that looks like one (see tokenLike), whatever its key,
// unless the key is one of the well-known names and ids. A pair without "=" is kept as
// a key with an empty value. Nil for an empty CNI_ARGS.
func RedactCNIArgs(raw string) map[string]string {
	if raw == "" {
		return nil
	}
	out := map[string]string{}
	for _, pair := range strings.Split(raw, ";") {
		k, v, _ := strings.Cut(pair, "=")
		if k == "" {
			continue
		}
		if !knownArg(k) && (secretKey(k) || tokenLike(v)) {
			v = Redacted
		}
		out[k] = v
	}
	return out
}

// Keys returns the keys of a JSON object, sorted and without duplicates; nil for
// anything else. It reads tokens rather than decoding into a map, which would make
// encoding/json build a decoder by reflection in every plugin process that logs.
func Keys(raw json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		k, ok := tok.(string)
		if err != nil || !ok || skipValue(dec) != nil {
			return nil
		}
		keys = append(keys, k)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil // something after the object
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// skipValue reads one whole value (nested objects and arrays included).
func skipValue(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if d != '{' && d != '[' {
		return errors.New("unexpected delimiter")
	}
	for dec.More() {
		if d == '{' {
			if _, err := dec.Token(); err != nil {
				return err
			}
		}
		if err := skipValue(dec); err != nil {
			return err
		}
	}
	_, err = dec.Token()
	return err
}

// RedactJSON returns raw with the string values that could be credentials replaced by
// Redacted, at any depth: under a key that names a secret, or token-like. Nil for no
// value or one that is not JSON.
func RedactJSON(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil
	}
	out, err := json.Marshal(redactValue(v, false))
	if err != nil {
		return nil
	}
	return out
}

func redactValue(v any, secret bool) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = redactValue(e, secret || secretKey(k))
		}
	case []any:
		for i, e := range t {
			t[i] = redactValue(e, secret)
		}
	case string:
		if secret || tokenLike(t) {
			return Redacted
		}
	}
	return v
}

// secretKey reports whether a key's name says its value is a credential: it holds one
// of secretWords anywhere ("clientSecret", "X-Auth-Token", "PASSWORD"), or one of its
// words (keyWords) is a short name of one ("PASS", "DB_PASS", "PWD", "CREDS", "KEY",
// "ssh-key", "apiKey"), whatever the case. Short names are matched only as whole words,
// so that "MONKEY" or "BYPASS" are not.
func secretKey(k string) bool {
	lower := strings.ToLower(k)
	return slices.ContainsFunc(secretWords, func(w string) bool { return strings.Contains(lower, w) }) ||
		slices.ContainsFunc(keyWords(k), func(w string) bool { return slices.Contains(secretNames, w) })
}

// secretWords name a credential wherever they appear in a key.
var secretWords = []string{"token", "secret", "passw", "passphrase", "credential", "auth", "apikey", "privkey",
	"private", "cookie", "session", "signature", "bearer"}

// secretNames name a credential when they are a whole word of a key.
var secretNames = []string{"pass", "pw", "pwd", "cred", "creds", "key", "keys", "pin", "otp", "jwt", "sig"}

// keyWords splits a key into its lower-case words: at every character that is not a
// letter, at a change from lower to upper case ("dbPass") and before the last capital
// of a run of them that a lower-case letter follows ("DBPass": "db", "pass").
func keyWords(k string) []string {
	var words []string
	start := -1
	for i := 0; i <= len(k); i++ {
		if start >= 0 && wordEnds(k, i) {
			words = append(words, strings.ToLower(k[start:i]))
			start = -1
		}
		if start < 0 && i < len(k) && isLetter(k[i]) {
			start = i
		}
	}
	return words
}

// wordEnds reports whether a word of k that began before i ends at i: at k's end, at a
// character that is not a letter, at a capital after a lower-case letter, or at the
// last capital of a run of them that a lower-case letter follows.
func wordEnds(k string, i int) bool {
	if i == len(k) || !isLetter(k[i]) {
		return true
	}
	return isUpper(k[i]) && (isLower(k[i-1]) || i+1 < len(k) && isLower(k[i+1]) && isUpper(k[i-1]))
}

func isLower(c byte) bool  { return c >= 'a' && c <= 'z' }
func isUpper(c byte) bool  { return c >= 'A' && c <= 'Z' }
func isLetter(c byte) bool { return isLower(c) || isUpper(c) }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

// tokenLike reports whether s looks like a credential: a JSON Web Token, or 20 or more
// characters of the base64/hex alphabets with letters and digits mixed and the
// randomness of generated keys (over 3 bits of entropy per character). UUIDs, which
// runtimes send as pod ids, are not. Names and paths (which have separators or little
// entropy) are kept: a false positive only hides a value, a false negative leaks one.
func tokenLike(s string) bool {
	if strings.HasPrefix(s, "eyJ") && strings.Count(s, ".") == 2 {
		return true
	}
	if len(s) < 20 || isUUID(s) {
		return false
	}
	letters, digits, ok := tokenChars(s)
	return ok && letters > 0 && digits > 0 && entropy(s) > 3
}

// tokenChars counts the letters and digits of s; ok is false when s holds a character
// outside the base64 and hex alphabets, their URL-safe and padding marks and the dot
// of a JWT.
func tokenChars(s string) (letters, digits int, ok bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case isLetter(c):
			letters++
		case isDigit(c):
			digits++
		case strings.IndexByte("+/=_-.~", c) < 0:
			return 0, 0, false
		}
	}
	return letters, digits, true
}

// entropy is the Shannon entropy of s's bytes, in bits per byte.
func entropy(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	var h float64
	n := float64(len(s))
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		// Dashes at 8, 13, 18 and 23, hex digits of either case everywhere else.
		dash := i == 8 || i == 13 || i == 18 || i == 23
		if dash != (s[i] == '-') || !dash && strings.IndexByte("0123456789abcdefABCDEF", s[i]) < 0 {
			return false
		}
	}
	return true
}
