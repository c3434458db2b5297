// Command printinfo prints buildinfo.Get() as JSON. buildinfo's tests
// link it with the Makefile's -X flags to prove that they reach the
// variables (the linker ignores an -X naming a variable that does not
// exist, so a rename would otherwise go unnoticed).
package main

import (
	"encoding/json"
	"os"

	"github.com/infermatrix/infermatrix/internal/buildinfo"
)

func main() {
	if err := json.NewEncoder(os.Stdout).Encode(buildinfo.Get()); err != nil {
		os.Exit(1)
	}
}
