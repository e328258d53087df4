// Package cli holds what the command-line tools share.
package cli

import (
	"strconv"
	"strings"

	"github.com/rdma-go/rdma-go/verbs"
)

// Strerror returns glibc's strerror text for the errno behind err (EIO when
// err carries none), as perror prints it. Go's errno strings are glibc's
// with a lower-case first letter; for a number Go has no text for it says
// "errno N" where glibc says "Unknown error N".
func Strerror(err error) string {
	e := verbs.ErrnoOf(err)
	s := e.Error()
	if s == "" || strings.HasPrefix(s, "errno ") {
		if e == 133 { // EHWPOISON, missing from Go's table
			return "Memory page has hardware error"
		}
		return "Unknown error " + strconv.Itoa(int(e))
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
