//go:build !unix

package verbs

import "os"

// ownedByMe trusts the directory where file owners are not Unix's.
func ownedByMe(os.FileInfo) bool { return true }
