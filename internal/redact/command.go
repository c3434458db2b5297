package redact

import "strings"

// Command returns a server's command line as a record may show it: URLs
// masked (Args), and the value of every flag named like a credential
// (--api-key KEY, --hf-token=KEY) replaced by Mask, for a launched
// server whose command line carries its own key.
func Command(argv []string) []string {
	out := Args(argv)
	for i, a := range out {
		if _, ok := CredentialFlag(a); !ok {
			continue
		}
		if strings.Contains(a, "=") {
			out[i] = a[:strings.Index(a, "=")+1] + Mask
		} else if i+1 < len(out) {
			out[i+1] = Mask
		}
	}
	return out
}

// CredentialFlag reports whether arg is a command-line flag named like a
// credential (SecretName), and its name.
func CredentialFlag(arg string) (string, bool) {
	if !strings.HasPrefix(arg, "-") {
		return "", false
	}
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	return name, name != "" && SecretName(name)
}
