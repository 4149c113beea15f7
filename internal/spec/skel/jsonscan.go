package skel

import (
	"bytes"
	"encoding/json"
)

// members calls fn with each key and raw value of the JSON object data, in order,
// without decoding or allocating (but for a key with escapes). data was decoded already,
// so it is valid JSON; anything else (not an object) yields nothing.
func members(data []byte, fn func(key, value []byte)) {
	entries(data, '{', func(i int) int {
		if data[i] != '"' {
			return -1
		}
		end := endOfString(data, i)
		key := data[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var s string
			if json.Unmarshal(data[i:end], &s) == nil {
				key = []byte(s)
			}
		}
		if i = skipSpace(data, end); i >= len(data) || data[i] != ':' {
			return -1
		}
		i = skipSpace(data, i+1)
		end = endOfValue(data, i)
		fn(key, data[i:end])
		return end
	})
}

// elements calls fn with each raw value of the JSON array data.
func elements(data []byte, fn func(value []byte)) {
	entries(data, '[', func(i int) int {
		if data[i] == ']' {
			return -1
		}
		end := endOfValue(data, i)
		fn(data[i:end])
		return end
	})
}

// entries walks the object or array data holds (open is '{' or '['): it calls entry
// with the index of each entry, which returns the index after it, or -1 to stop.
func entries(data []byte, open byte, entry func(i int) int) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != open {
		return
	}
	for i++; ; i++ {
		if i = skipSpace(data, i); i >= len(data) {
			return
		}
		if i = entry(i); i < 0 {
			return
		}
		if i = skipSpace(data, i); i >= len(data) || data[i] != ',' {
			return
		}
	}
}

// skipSpace is the index of the first non-space byte at or after i (i <= len(data)).
func skipSpace(data []byte, i int) int {
	return len(data) - len(bytes.TrimLeft(data[i:], " \t\n\r"))
}

// endOfString is the index after the closing quote of the string starting at data[i].
func endOfString(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(data)
}

// endOfValue is the index after the value starting at data[i].
func endOfValue(data []byte, i int) int {
	if i >= len(data) {
		return i
	}
	switch data[i] {
	case '"':
		return endOfString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				i = endOfString(data, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	// A number, true, false or null ends where the enclosing object or list goes on.
	if n := bytes.IndexAny(data[i:], ",}] \t\n\r"); n >= 0 {
		return i + n
	}
	return len(data)
}
