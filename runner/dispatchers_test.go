package runner

import (
	"sync"
	"testing"
)

// TestDispatchersAddNoLimit: an open loop sends every arrival when it is
// due, however many are in flight, so the dispatchers must run every
// function at once when none returns until all have started; and a
// goroutine freed by one must take the next.
func TestDispatchersAddNoLimit(t *testing.T) {
	d := newDispatchers()
	defer d.close()
	const n = 50
	var started, done sync.WaitGroup
	started.Add(n)
	done.Add(n)
	release := make(chan struct{})
	for range n {
		d.run(func() {
			defer done.Done()
			started.Done()
			<-release
		})
	}
	started.Wait() // would hang if a function waited for another to end
	close(release)
	done.Wait()
	ran := 0
	for range 2 * n {
		done.Add(1)
		d.run(func() { ran++; done.Done() })
		done.Wait() // one at a time, so ran needs no lock
	}
	if ran != 2*n {
		t.Errorf("ran %d functions; want %d", ran, 2*n)
	}
}

// deepStack uses about depth × 1 KiB of stack, as the request path does
// (the HTTP client under fire).
//
//go:noinline
func deepStack(depth int) byte {
	var pad [1024]byte
	pad[depth%len(pad)] = byte(depth)
	if depth == 0 {
		return pad[0]
	}
	return deepStack(depth-1) + pad[depth%len(pad)]
}

// BenchmarkDispatch compares a new goroutine per request with the
// dispatchers' kept goroutines, for a function with a 16 KiB stack: a new
// goroutine grows its stack by copying it each time.
func BenchmarkDispatch(b *testing.B) {
	var wg sync.WaitGroup
	work := func() { deepStack(16); wg.Done() }
	b.Run("go", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			wg.Add(1)
			go work()
			wg.Wait()
		}
	})
	b.Run("dispatchers", func(b *testing.B) {
		b.ReportAllocs()
		d := newDispatchers()
		defer d.close()
		for b.Loop() {
			wg.Add(1)
			d.run(work)
			wg.Wait()
		}
	})
}
