package skel

import "encoding/json"

// members calls fn with each key and raw value of the JSON object data, in order,
// without decoding or allocating (but for a key with escapes). data was decoded already,
// so it is valid JSON; anything else (not an object) yields nothing.
func members(data []byte, fn func(key, value []byte)) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return
	}
	i++
	for {
		i = skipSpace(data, i)
		if i >= len(data) || data[i] != '"' {
			return
		}
		end := endOfString(data, i)
		key := data[i+1 : end-1]
		if hasEscape(key) {
			var s string
			if json.Unmarshal(data[i:end], &s) == nil {
				key = []byte(s)
			}
		}
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return
		}
		i = skipSpace(data, i+1)
		vend := endOfValue(data, i)
		fn(key, data[i:vend])
		i = skipSpace(data, vend)
		if i >= len(data) || data[i] != ',' {
			return
		}
		i++
	}
}

// elements calls fn with each raw value of the JSON array data.
func elements(data []byte, fn func(value []byte)) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		return
	}
	i++
	for {
		i = skipSpace(data, i)
		if i >= len(data) || data[i] == ']' {
			return
		}
		end := endOfValue(data, i)
		fn(data[i:end])
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ',' {
			return
		}
		i++
	}
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
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
	for i < len(data) {
		switch data[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

func hasEscape(b []byte) bool {
	for _, c := range b {
		if c == '\\' {
			return true
		}
	}
	return false
}
