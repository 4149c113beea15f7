package wire

import "fmt"

// Limits from the specification; a peer that exceeds them is broken or hostile.
const (
	maxMessageSize   = 1 << 27 // 128 MiB, header and body together
	maxArraySize     = 1 << 26 // 64 MiB of array contents
	maxSignatureSize = 255
	maxNesting       = 64 // containers inside containers, variants included
)

// alignment is the boundary a value of the type starting with c is aligned to.
func alignment(c byte) int {
	switch c {
	case 'n', 'q':
		return 2
	case 'b', 'i', 'u', 'h', 's', 'o', 'a':
		return 4
	case 'x', 't', 'd', '(', '{':
		return 8
	default: // 'y', 'g', 'v'
		return 1
	}
}

// isBasic reports whether c is a single-character type this package decodes to a value.
func isBasic(c byte) bool {
	switch c {
	case 'y', 'b', 'n', 'q', 'i', 'u', 'x', 't', 'd', 's', 'o', 'g':
		return true
	}
	return false
}

// nextType splits the first complete type off sig, so that a body or a struct can be
// walked one value at a time.
func nextType(sig string) (string, string, error) {
	n, err := typeLen(sig, 0)
	if err != nil {
		return "", "", fmt.Errorf("signature %q: %w", sig, err)
	}
	return sig[:n], sig[n:], nil
}

func typeLen(sig string, depth int) (int, error) {
	if sig == "" {
		return 0, fmt.Errorf("missing type")
	}
	if depth > maxNesting {
		return 0, fmt.Errorf("nested too deeply")
	}
	switch c := sig[0]; {
	case isBasic(c) || c == 'v' || c == 'h':
		return 1, nil
	case c == 'a':
		n, err := typeLen(sig[1:], depth+1)
		return n + 1, err
	case c == '(' || c == '{':
		end := byte(')')
		if c == '{' {
			end = '}'
		}
		i := 1
		for i < len(sig) && sig[i] != end {
			n, err := typeLen(sig[i:], depth+1)
			if err != nil {
				return 0, err
			}
			i += n
		}
		if i == 1 || i == len(sig) {
			return 0, fmt.Errorf("unbalanced or empty %c", c)
		}
		return i + 1, nil
	default:
		return 0, fmt.Errorf("unknown type code %q", c)
	}
}

// validSignature checks that sig is a sequence of complete types within the length limit.
func validSignature(sig string) error {
	if len(sig) > maxSignatureSize {
		return fmt.Errorf("signature of %d bytes exceeds %d", len(sig), maxSignatureSize)
	}
	for rest := sig; rest != ""; {
		var err error
		if _, rest, err = nextType(rest); err != nil {
			return err
		}
	}
	return nil
}
