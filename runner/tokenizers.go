package runner

import (
	"fmt"
	"sync"

	"github.com/infermatrix/infermatrix/schema"
	"github.com/infermatrix/infermatrix/tokenizer"
)

// loadTokenizers starts loading every tokenizer the plan's rows name, each
// in its own goroutine, and returns the map they go into and the function
// that waits for them. Loading is CPU work of a tenth of a second or more
// (the built-in o200k tables, an 11 MB tokenizer.json), and finding the
// server at a URL is mostly waiting on the network, so the two overlap
// instead of adding up before the first request. The map must not be read
// before wait returns; wait may be called more than once and returns the
// first row's error, as loading them in turn would.
func loadTokenizers(plan *schema.Plan) (map[string]tokenizer.Tokenizer, func() error) {
	toks := map[string]tokenizer.Tokenizer{}
	var names []string
	firstRow := map[string]string{}
	for _, row := range plan.Rows {
		if _, ok := firstRow[row.Tokenizer]; !ok {
			firstRow[row.Tokenizer] = row.ID
			names = append(names, row.Tokenizer)
		}
	}
	loaded := make([]tokenizer.Tokenizer, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loaded[i], errs[i] = tokenizer.New(name)
		}()
	}
	var once sync.Once
	var err error
	return toks, func() error {
		once.Do(func() {
			wg.Wait()
			for i, name := range names {
				if errs[i] != nil {
					err = fmt.Errorf("row %s: %w", firstRow[name], errs[i])
					return
				}
				toks[name] = loaded[i]
			}
		})
		return err
	}
}
