// Package protocol is the client side of the OpenAI-compatible API that
// inference servers speak: it sends one chat, completions, embeddings or
// rerank request and fills in its record (metrics.Record) with what the
// wire showed: when the connection, the first byte and each server-sent
// event arrived, the text and usage the answer carried, and what went
// wrong, classified.
//
// It is kept apart from the runner, which decides when requests are sent
// and what happens to their records, so that the timing-critical path
// (the SSE reader, the chunk decoder) reads on its own. It imports no
// package that schedules, records or reports.
package protocol
