package main

import (
	"fmt"
	"os"
	"strings"
)

// terminationLimit is the most Kubernetes keeps of a container's
// termination message (4096 bytes); a longer one would be cut by the
// kubelet mid-word, so it is cut here, on a rune boundary, with a mark.
const terminationLimit = 4096

// writeTerminationLog writes a one-paragraph account of how the command
// ended to path, for an orchestrator to show without reading logs: a
// Kubernetes pod's `kubectl get pod -o jsonpath='{..terminated.message}'`
// reads /dev/termination-log. An empty path writes nothing. The file is
// replaced, not appended to, so a message from an earlier attempt never
// survives into this one's.
func writeTerminationLog(path, msg string) error {
	if path == "" {
		return nil
	}
	msg = strings.TrimSpace(msg) + "\n"
	if len(msg) > terminationLimit {
		cut := terminationLimit - len(" …\n")
		for cut > 0 && !utf8RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + " …\n"
	}
	if err := os.WriteFile(path, []byte(msg), 0o644); err != nil {
		return fmt.Errorf("--termination-log: %w", err)
	}
	return nil
}

// utf8RuneStart says whether b begins a UTF-8 sequence (is not a
// continuation byte), so a cut before it leaves whole runes.
func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
