// Package samples keeps a row's samples with memory that does not grow
// with the row's length: a Column holds up to a limit of float64 samples
// in memory and spills the rest to a temporary file, from which its
// statistics are still computed exactly (count, mean, population standard
// deviation, min, max, and any type-7 percentile, found by selection); a
// Spans does the same for request spans, from which the in-flight figures
// are computed by merging sorted runs. A row of ordinary length never
// touches the disk, and its figures are bit for bit those of an in-memory
// sort; a soak of a day holds a few megabytes where it held gigabytes.
package samples

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
)

// DefaultLimit is how many samples a column keeps in memory before it
// spills: 512 KiB of float64s, more than an ordinary row's metric holds,
// so that only a long row pays for the disk.
const DefaultLimit = 64 << 10

// maxBlock bounds the samples written, and read back, at a time once a
// column has spilled: the column's memory from then on.
const maxBlock = 8 << 10

// Store is the temporary file the columns of a row (its steps and turns
// included) spill to, created at the first spill in Dir. On Unix the file
// is removed as soon as it is open, so that nothing is left behind however
// the process ends; the space is freed when the store, and every Dist that
// reads from it, is no longer reachable. A Store is safe for concurrent
// use; the columns writing to it are not.
type Store struct {
	dir string

	mu      sync.Mutex
	f       *os.File
	end     int64
	err     error
	scratch []byte
}

// NewStore returns a store whose file will go in dir: os.TempDir() when
// empty.
func NewStore(dir string) *Store { return &Store{dir: dir} }

// open creates the file; s.mu is held.
func (s *Store) open() error {
	if s.f != nil || s.err != nil {
		return s.err
	}
	f, err := os.CreateTemp(s.dir, "infermatrix-samples-*")
	if err != nil {
		s.err = fmt.Errorf("spill samples: %w", err)
		return s.err
	}
	if os.Remove(f.Name()) != nil {
		// A system that will not remove an open file (Windows): remove
		// it once nothing can read it any more.
		runtime.AddCleanup(s, func(f *os.File) {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}, f)
	}
	s.f = f
	return nil
}

// appendFloats writes vs at the end of the file and returns where.
func (s *Store) appendFloats(vs []float64) (int64, error) {
	return appendWords(s, vs, math.Float64bits)
}

// appendInts writes vs at the end of the file and returns where.
func (s *Store) appendInts(vs []int64) (int64, error) {
	return appendWords(s, vs, func(v int64) uint64 { return uint64(v) })
}

// appendWords writes vs, each as the 8 little-endian bytes of word(v), at
// the end of s's file and returns where.
func appendWords[T any](s *Store, vs []T, word func(T) uint64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.open(); err != nil {
		return 0, err
	}
	b := s.scratch[:0]
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, word(v))
	}
	s.scratch = b[:0]
	return s.appendLocked(b)
}

func (s *Store) appendLocked(b []byte) (int64, error) {
	off := s.end
	if _, err := s.f.WriteAt(b, off); err != nil {
		return 0, fmt.Errorf("spill samples: %w", err)
	}
	s.end += int64(len(b))
	return off, nil
}

// read fills buf with the 8-byte words at off.
func (s *Store) read(off int64, buf []byte) error {
	s.mu.Lock()
	f := s.f
	s.mu.Unlock()
	if f == nil {
		return fmt.Errorf("read spilled samples: no spill file")
	}
	if _, err := f.ReadAt(buf, off); err != nil {
		return fmt.Errorf("read spilled samples: %w", err)
	}
	return nil
}

// Size is the bytes spilled so far.
func (s *Store) Size() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.end
}
