package schema

import "reflect"

// The decoder's view of the types, exported for the JSON Schema generator
// (package schema/jsonschema). The generator walks Experiment by reflection
// through these same functions the decoder uses, so the schema it writes
// cannot drift from what Load reads; keeping the generator in its own package
// keeps this one about loading and checking experiments.

// Key is one YAML key of a struct type, as the decoder reads it.
type Key struct {
	// Name is the YAML key.
	Name string
	// Field is the Go field behind the key; its tags (doc, default,
	// required, enum and bounds) say what the key accepts.
	Field reflect.StructField
}

// Keys lists the YAML keys of struct type t in declaration order, with
// `yaml:",inline"` fields flattened, exactly as the decoder matches them.
func Keys(t reflect.Type) []Key {
	fields := fieldsOf(t)
	out := make([]Key, len(fields))
	for i, f := range fields {
		out[i] = Key{Name: f.name, Field: f.field}
	}
	return out
}

// DecodesItself reports whether values of type t decode themselves from YAML
// (as Length accepts a bare number or a mapping), so their fields alone do
// not describe the shapes they accept.
func DecodesItself(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(nodeDecoderType)
}

// IDPattern is the regular expression an experiment name and a row id must
// match.
func IDPattern() string { return idPattern.String() }

var nodeDecoderType = reflect.TypeOf((*nodeDecoder)(nil)).Elem()
