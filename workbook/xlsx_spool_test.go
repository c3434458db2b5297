package workbook

import (
	"bytes"
	"os"
	"testing"
)

// TestXLSXSpoolToFile: a workbook whose compressed parts outgrow the
// spool's memory comes out byte for byte as one held in memory, and leaves
// no temporary file behind.
func TestXLSXSpoolToFile(t *testing.T) {
	inMemory := renderXLSX(t, xlsxInput(t))
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	defer func(n int64) { xlsxSpoolMemory = n }(xlsxSpoolMemory)
	xlsxSpoolMemory = 1 // every part to the file
	spooled := renderXLSX(t, xlsxInput(t))
	if !bytes.Equal(inMemory, spooled) {
		t.Errorf("spooled workbook differs from the one in memory (%d and %d bytes)", len(spooled), len(inMemory))
	}
	if left, err := os.ReadDir(tmp); err != nil || len(left) != 0 {
		t.Errorf("temporary files left: %v (%v)", left, err)
	}
	openXLSX(t, spooled)
}

// TestXLSXZip64Patch: the version field of a ZIP64 part's local header is
// set to 4.5 even when the header reaches the writer in pieces that split
// the field.
func TestXLSXZip64Patch(t *testing.T) {
	for _, cut := range []int{1, 5, 6, 7, 20} {
		var out bytes.Buffer
		p := &xlsxZip64Patch{w: &out}
		if _, err := p.Write([]byte("xx")); err != nil { // bytes before the header
			t.Fatal(err)
		}
		p.at, p.patch = p.written+4, []byte{45, 0}
		hdr := []byte("PK\x03\x04\x14\x00rest-of-header")
		orig := bytes.Clone(hdr)
		for _, piece := range [][]byte{hdr[:cut], hdr[cut:]} {
			if _, err := p.Write(piece); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(hdr, orig) {
			t.Errorf("cut %d: the caller's buffer was changed", cut)
		}
		want := append([]byte("xx"), orig...)
		want[6], want[7] = 45, 0
		if !bytes.Equal(out.Bytes(), want) {
			t.Errorf("cut %d: wrote %q; want %q", cut, out.Bytes(), want)
		}
		if _, err := p.Write([]byte("\x14\x00")); err != nil {
			t.Fatal(err)
		}
		if got := out.Bytes()[out.Len()-2:]; !bytes.Equal(got, []byte("\x14\x00")) {
			t.Errorf("cut %d: patched past the field: %q", cut, got)
		}
	}
}
