// Package workload decides what requests a row sends: synthetic prompts
// of exact token lengths cut from an embedded corpus, dataset and trace
// files (JSONL, ShareGPT, Mooncake) read and checked before anything is
// sent, prefix-cache blocks built from trace hash ids, conversation
// histories, and the JSON bodies of chat, completions, embeddings and
// rerank requests.
//
// It is the generation half of a run, kept apart from the runner, which
// decides when requests are sent, sends them and records what happened:
// everything here is a function of the row, its seed and the run's
// nonce, so the same experiment sends the same requests whatever the
// scheduling. It imports no package that runs, records or reports.
package workload
