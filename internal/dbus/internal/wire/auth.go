package wire

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// authenticate runs the client side of the SASL handshake with the EXTERNAL mechanism:
// the bus checks our uid from the socket's credentials, so the only thing to send is
// that uid, as hex of its decimal digits. The leading NUL byte is the credentials byte
// the specification requires before any SASL command.
func authenticate(w io.Writer, r *bufio.Reader) error {
	uid := hex.EncodeToString([]byte(strconv.Itoa(os.Getuid())))
	if _, err := io.WriteString(w, "\x00AUTH EXTERNAL "+uid+"\r\n"); err != nil {
		return err
	}
	line, err := readLine(r)
	if err != nil {
		return err
	}
	verb, rest, _ := strings.Cut(line, " ")
	switch verb {
	case "OK":
		_, err := io.WriteString(w, "BEGIN\r\n")
		return err
	case "REJECTED":
		return fmt.Errorf("bus rejected EXTERNAL authentication as uid %d (it accepts: %s)", os.Getuid(), rest)
	case "ERROR":
		return fmt.Errorf("bus answered AUTH with an error: %s", rest)
	}
	return fmt.Errorf("unexpected answer to AUTH: %q", line)
}

// readLine reads one CRLF-terminated SASL line without its terminator.
func readLine(r *bufio.Reader) (string, error) {
	b, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return "", errors.New("SASL line too long")
	}
	if err != nil {
		return "", unexpectedEOF(err)
	}
	line, ok := strings.CutSuffix(string(b), "\r\n")
	if !ok {
		return "", fmt.Errorf("SASL line %q does not end in CRLF", b)
	}
	return line, nil
}
