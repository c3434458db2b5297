package runner

// dispatchers runs an open loop's requests on goroutines kept from one
// request to the next, instead of a new goroutine per request.
//
// A new goroutine starts on a small stack and the request path (the HTTP
// client, the stream reader) is deep: every request grew its stack by
// copying it, several times, before it had sent anything, which was 5% of
// the client's CPU at 5,000 requests a second (BenchmarkPoisson5000's
// profile: runtime.newstack and copystack, plus newproc 3%), and all of it
// between the pacer's wake and the request's dispatch stamp. A goroutine
// kept waiting for the next request keeps its grown stack.
//
// It adds no limit: when no goroutine is free, a request gets a new one,
// so an open loop still sends every arrival when it is due however many
// are in flight. Goroutines that finish a request wait for the next; all
// of them end when close is called (those busy, once their request ends).
type dispatchers struct {
	free chan func()
}

func newDispatchers() *dispatchers { return &dispatchers{free: make(chan func())} }

// run runs f on a free goroutine, or a new one. Only one goroutine may
// call run, and never after close.
func (d *dispatchers) run(f func()) {
	select {
	case d.free <- f: // a goroutine was waiting
	default:
		go d.work(f)
	}
}

func (d *dispatchers) work(f func()) {
	for ok := true; ok; f, ok = <-d.free {
		f()
	}
}

// close ends the goroutines once they are free.
func (d *dispatchers) close() { close(d.free) }
