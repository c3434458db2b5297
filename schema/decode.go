package schema

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/infermatrix/infermatrix/internal/suggest"
	"go.yaml.in/yaml/v3"
)

// decoder turns a yaml.Node tree into Experiment values by reflection.
//
// yaml.v3's own Decode with KnownFields stops short of what a reviewer needs:
// its errors carry a line but no column or key path, it gives no hints, and a
// value YAML reads as a float (driver: 580.95, version: 0.10) loses its text.
// Walking the node tree ourselves keeps the position of every value, collects
// every problem, and reads scalars from their source text.
type decoder struct {
	file     string
	problems Problems
	pos      map[string]Pos        // path → position of the value node
	nodes    map[string]*yaml.Node // path → the value node, for expression columns
	keyPos   map[string]Pos        // path → position of the key naming it
	broken   map[string]bool
	// meant maps a mapping's path to the keys its misspelled keys were
	// probably meant to be, so validation does not also report them missing.
	meant map[string][]string
}

func newDecoder(file string) *decoder {
	return &decoder{
		file:   file,
		pos:    map[string]Pos{},
		nodes:  map[string]*yaml.Node{},
		keyPos: map[string]Pos{},
		broken: map[string]bool{},
		meant:  map[string][]string{},
	}
}

// nodeDecoder lets a type accept more than one YAML shape, as Length accepts
// a bare number.
type nodeDecoder interface {
	decodeNode(d *decoder, n *yaml.Node, path string)
}

func posOf(n *yaml.Node) Pos { return Pos{Line: n.Line, Col: n.Column} }

func (d *decoder) addf(n *yaml.Node, path, hint, format string, args ...any) {
	p := Problem{File: d.file, Path: path, Message: fmt.Sprintf(format, args...), Hint: hint}
	if n != nil {
		p.Pos = posOf(n)
	}
	d.problems = append(d.problems, p)
}

// fail records a problem with the value at path and marks the path broken, so
// that validation does not pile a second, derived complaint on top.
func (d *decoder) fail(n *yaml.Node, path, hint, format string, args ...any) {
	d.addf(n, path, hint, format, args...)
	d.broken[path] = true
}

// misspelled reports whether the mapping at path has an unknown key that
// was probably meant to be one of keys.
func (d *decoder) misspelled(path string, keys ...string) bool {
	for _, m := range d.meant[path] {
		for _, k := range keys {
			if m == k {
				return true
			}
		}
	}
	return false
}

// isBroken reports whether path or any ancestor failed to decode.
func (d *decoder) isBroken(path string) bool {
	for p := path; p != ""; p = parentPath(p) {
		if d.broken[p] {
			return true
		}
	}
	return false
}

func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func indexPath(parent string, i int) string { return fmt.Sprintf("%s[%d]", parent, i) }

// describe says what a node is, for "expected X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return describe(n.Alias)
	}
	switch n.ShortTag() {
	case "!!null":
		return "null"
	case "!!bool":
		return "the boolean " + n.Value
	case "!!int", "!!float":
		return "the number " + n.Value
	default:
		return strconv.Quote(n.Value) + " (a string)"
	}
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// fieldInfo describes one YAML key of a struct type.
type fieldInfo struct {
	name  string
	index []int
	field reflect.StructField
}

var fieldCache sync.Map // reflect.Type → []fieldInfo

// fieldsOf lists the YAML keys of a struct type in declaration order,
// flattening `yaml:",inline"` fields.
func fieldsOf(t reflect.Type) []fieldInfo {
	if v, ok := fieldCache.Load(t); ok {
		return v.([]fieldInfo)
	}
	var out []fieldInfo
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if opts == "inline" {
			for _, sub := range fieldsOf(f.Type) {
				sub.index = append([]int{i}, sub.index...)
				out = append(out, sub)
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out = append(out, fieldInfo{name: name, index: []int{i}, field: f})
	}
	fieldCache.Store(t, out)
	return out
}

var durationType = reflect.TypeOf(Duration(0))

// value decodes n into v. field, when non-nil, carries the constraint tags
// (enum, minimum, ...) of the struct field v belongs to.
func (d *decoder) value(n *yaml.Node, path string, v reflect.Value, field *reflect.StructField) {
	d.pos[path] = posOf(n)
	n = resolveAlias(n)
	d.nodes[path] = n
	if v.CanAddr() {
		if nd, ok := v.Addr().Interface().(nodeDecoder); ok {
			nd.decodeNode(d, n, path)
			return
		}
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // null leaves the zero value: "not set"
	}
	switch {
	case v.Kind() == reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		d.value(n, path, v.Elem(), field)
		return
	case v.Type() == durationType:
		d.duration(n, path, v)
	case v.Kind() == reflect.Struct:
		d.structValue(n, path, v)
		return
	case v.Kind() == reflect.Slice:
		d.slice(n, path, v, field)
		return
	case v.Kind() == reflect.Map:
		d.mapValue(n, path, v)
		return
	case v.Kind() == reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.fail(n, path, "", "expected a string, got %s", describe(n))
			return
		}
		// The source text, not YAML's reading of it: "version: 0.10" stays
		// "0.10" rather than becoming the float 0.1.
		v.SetString(n.Value)
	case v.Kind() == reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			d.fail(n, path, "write true or false", "expected true or false, got %s", describe(n))
			return
		}
		v.SetBool(n.Value == "true" || n.Value == "True" || n.Value == "TRUE")
	case v.CanInt():
		var x int64
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&x) != nil {
			hint := ""
			if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float" {
				hint = "this key takes a whole number"
			}
			d.fail(n, path, hint, "expected an integer, got %s", describe(n))
			return
		}
		if v.OverflowInt(x) {
			d.fail(n, path, "", "%s is out of range", n.Value)
			return
		}
		v.SetInt(x)
	case v.CanFloat():
		var x float64
		tag := n.ShortTag()
		if n.Kind != yaml.ScalarNode || (tag != "!!int" && tag != "!!float") || n.Decode(&x) != nil {
			d.fail(n, path, "", "expected a number, got %s", describe(n))
			return
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			d.fail(n, path, "", "expected a finite number, got %s", n.Value)
			return
		}
		v.SetFloat(x)
	default:
		panic(fmt.Sprintf("schema: no decoder for %s at %s", v.Type(), path))
	}
	if field != nil {
		d.constrain(n, path, v, field)
	}
}

func (d *decoder) duration(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.ScalarNode {
		d.fail(n, path, "", "expected a duration such as 30s, got %s", describe(n))
		return
	}
	if tag := n.ShortTag(); tag == "!!int" || tag == "!!float" {
		d.fail(n, path, fmt.Sprintf("add a unit: %ss or %sms", n.Value, n.Value),
			"expected a duration such as 30s, got the bare number %s", n.Value)
		return
	}
	x, err := time.ParseDuration(n.Value)
	if err != nil {
		d.fail(n, path, "units are ns, us, ms, s, m, h, e.g. 1m30s", "expected a duration such as 30s, got %q", n.Value)
		return
	}
	if x < 0 {
		d.fail(n, path, "", "duration must not be negative, got %s", n.Value)
		return
	}
	v.SetInt(int64(x))
}

// mappingPairs returns the key/value pairs of a mapping with YAML merge keys
// ("<<: *base") expanded, merged pairs first so the mapping's own keys win.
func mappingPairs(n *yaml.Node) (merged, own [][2]*yaml.Node) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Value == "<<" && (k.Tag == "" || k.Tag == "!" || k.ShortTag() == "!!merge") {
			src := resolveAlias(val)
			var maps []*yaml.Node
			if src.Kind == yaml.SequenceNode {
				// "<<: [*a, *b]": keys of earlier mappings override later
				// ones (YAML merge-key spec). Later pairs win here, so the
				// list is walked from the end.
				for i := len(src.Content) - 1; i >= 0; i-- {
					maps = append(maps, resolveAlias(src.Content[i]))
				}
			} else {
				maps = append(maps, src)
			}
			for _, m := range maps {
				if m.Kind != yaml.MappingNode {
					continue
				}
				mm, mo := mappingPairs(m)
				merged = append(merged, mm...)
				merged = append(merged, mo...)
			}
			continue
		}
		own = append(own, [2]*yaml.Node{k, val})
	}
	return merged, own
}

func (d *decoder) structValue(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "", "expected a mapping of keys, got %s", describe(n))
		return
	}
	fields := fieldsOf(v.Type())
	byName := make(map[string]fieldInfo, len(fields))
	names := make([]string, 0, len(fields))
	for _, f := range fields {
		byName[f.name] = f
		names = append(names, f.name)
	}
	merged, own := mappingPairs(n)
	seen := map[string]*yaml.Node{}
	set := map[string]bool{}
	for pass, pairs := range [][][2]*yaml.Node{merged, own} {
		isOwn := pass == 1
		for _, kv := range pairs {
			k, val := kv[0], kv[1]
			if k.Kind != yaml.ScalarNode {
				d.addf(k, path, "", "keys must be plain names, got %s", describe(k))
				continue
			}
			key := k.Value
			fpath := joinPath(path, key)
			if isOwn {
				if prev, dup := seen[key]; dup {
					d.addf(k, fpath, fmt.Sprintf("remove one of them; the first is at line %d", prev.Line),
						"key %q appears twice in this mapping", key)
					continue
				}
				seen[key] = k
			}
			f, ok := byName[key]
			if !ok && path == "" && strings.HasPrefix(key, "x-") {
				continue // an extension key holding anchors
			}
			if !ok {
				if near := suggest.Closest(key, names, 1); len(near) > 0 {
					d.meant[path] = append(d.meant[path], near[0])
				}
				d.addf(k, fpath, unknownKeyHint(key, names, v.Type()), "unknown key %q", key)
				d.broken[fpath] = true
				continue
			}
			d.keyPos[fpath] = posOf(k)
			set[key] = true
			fv := v.FieldByIndex(f.index)
			// A key replaces a value merged in with "<<" wholesale, as YAML
			// merge keys specify; nothing is deep-merged.
			fv.Set(reflect.Zero(fv.Type()))
			d.value(val, fpath, fv, &f.field)
		}
	}
	for _, f := range fields {
		if f.field.Tag.Get("required") == "true" && !set[f.name] && !d.misspelled(path, f.name) {
			d.addf(n, joinPath(path, f.name), requiredHint(f), "missing required key %q", f.name)
			d.broken[joinPath(path, f.name)] = true
		}
	}
}

func requiredHint(f fieldInfo) string {
	if doc := f.field.Tag.Get("doc"); doc != "" {
		return f.name + ": " + doc
	}
	return ""
}

// unknownKeyHint suggests the key the author probably meant: a near-miss
// among this mapping's keys, or the same key in the structure where it
// belongs ("per_second is a key of rate").
func unknownKeyHint(key string, siblings []string, t reflect.Type) string {
	if near := suggest.Closest(key, siblings, 3); len(near) > 0 {
		return "did you mean " + suggest.Quote(near) + "?"
	}
	if where := keyHomes()[key]; len(where) > 0 {
		return fmt.Sprintf("%q is a key of %s, not of this mapping", key, suggest.Quote(where))
	}
	return "valid keys here: " + strings.Join(siblings, ", ")
}

var (
	homesOnce sync.Once
	homes     map[string][]string
)

// keyHomes maps every key of the format to the names of the mappings that
// have it, for hints about keys written at the wrong level.
func keyHomes() map[string][]string {
	homesOnce.Do(func() {
		homes = map[string][]string{}
		eachKey(func(_, parent string, f fieldInfo) {
			if parent != "" && !slices.Contains(homes[f.name], parent) {
				homes[f.name] = append(homes[f.name], parent)
			}
		})
	})
	return homes
}

// eachKey calls visit for every key of the format at every place it can
// appear, walking from Experiment through pointers, slices ("rows[]") and
// inline fields as the decoder does. path is the key's path, such as
// "rows[].rate.per_second"; parent is the name of the mapping holding it.
func eachKey(visit func(path, parent string, f fieldInfo)) {
	stack := map[reflect.Type]bool{}
	var walk func(t reflect.Type, path, parent string)
	walk = func(t reflect.Type, path, parent string) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			if t.Kind() == reflect.Slice {
				path += "[]"
			}
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t == durationType || stack[t] {
			return
		}
		stack[t] = true
		defer delete(stack, t)
		for _, f := range fieldsOf(t) {
			p := joinPath(path, f.name)
			visit(p, parent, f)
			walk(f.field.Type, p, f.name)
		}
	}
	walk(reflect.TypeOf(Experiment{}), "", "")
}

func (d *decoder) slice(n *yaml.Node, path string, v reflect.Value, field *reflect.StructField) {
	if n.Kind != yaml.SequenceNode {
		hint := ""
		if n.Kind == yaml.ScalarNode {
			hint = fmt.Sprintf("write a list, e.g. [%s]", n.Value)
		}
		d.fail(n, path, hint, "expected a list, got %s", describe(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		d.value(item, indexPath(path, i), s.Index(i), field)
	}
	v.Set(s)
}

func (d *decoder) mapValue(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "", "expected a mapping, got %s", describe(n))
		return
	}
	m := reflect.MakeMap(v.Type())
	elem := v.Type().Elem()
	merged, own := mappingPairs(n)
	if !d.uniqueKeys(own, path) {
		return
	}
	for _, kv := range append(merged, own...) {
		k, val := kv[0], resolveAlias(kv[1])
		if k.Kind != yaml.ScalarNode {
			d.addf(k, path, "", "keys must be plain names, got %s", describe(k))
			continue
		}
		kpath := joinPath(path, k.Value)
		d.pos[kpath] = posOf(kv[1])
		d.keyPos[kpath] = posOf(k)
		if elem.Kind() == reflect.Interface {
			x, err := d.freeform(val, kpath)
			if err != nil {
				continue
			}
			if x == nil {
				// A null keeps the key with a nil value, which Resolve reads
				// as "remove this key inherited from defaults".
				m.SetMapIndex(reflect.ValueOf(k.Value), reflect.Zero(elem))
				continue
			}
			m.SetMapIndex(reflect.ValueOf(k.Value), reflect.ValueOf(x))
			continue
		}
		if val.Kind != yaml.ScalarNode {
			d.fail(val, kpath, "", "expected a string, got %s", describe(val))
			continue
		}
		ev := reflect.New(elem).Elem()
		d.value(val, kpath, ev, nil)
		m.SetMapIndex(reflect.ValueOf(k.Value), ev)
	}
	v.Set(m)
}

// uniqueKeys reports a key written twice in one mapping, which YAML
// forbids and which would otherwise silently keep the last value.
func (d *decoder) uniqueKeys(pairs [][2]*yaml.Node, path string) bool {
	seen := map[string]*yaml.Node{}
	ok := true
	for _, kv := range pairs {
		k := kv[0]
		if k.Kind != yaml.ScalarNode {
			continue
		}
		if prev, dup := seen[k.Value]; dup {
			d.fail(k, joinPath(path, k.Value), fmt.Sprintf("remove one of them; the first is at line %d", prev.Line),
				"key %q appears twice in this mapping", k.Value)
			ok = false
			continue
		}
		seen[k.Value] = k
	}
	return ok
}

// freeform decodes free-form data (metadata, body, engine flags) into values
// encoding/json can write, since these are recorded in JSON artifacts.
func (d *decoder) freeform(n *yaml.Node, path string) (any, error) {
	n = resolveAlias(n)
	switch n.Kind {
	case yaml.MappingNode:
		out := map[string]any{}
		merged, own := mappingPairs(n)
		if !d.uniqueKeys(own, path) {
			return nil, fmt.Errorf("duplicate key")
		}
		for _, kv := range append(merged, own...) {
			k := kv[0]
			if k.Kind != yaml.ScalarNode {
				d.fail(k, path, "", "keys must be plain names, got %s", describe(k))
				return nil, fmt.Errorf("bad key")
			}
			x, err := d.freeform(kv[1], joinPath(path, k.Value))
			if err != nil {
				return nil, err
			}
			out[k.Value] = x
		}
		return out, nil
	case yaml.SequenceNode:
		out := make([]any, len(n.Content))
		for i, item := range n.Content {
			x, err := d.freeform(item, indexPath(path, i))
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	}
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err == nil {
			return b, nil
		}
	case "!!int":
		var i int64
		if err := n.Decode(&i); err == nil {
			return i, nil
		}
	case "!!float":
		var f float64
		if err := n.Decode(&f); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return f, nil
		}
		d.fail(n, path, "quote it to send it as a string", "%s is not a number JSON can carry", n.Value)
		return nil, fmt.Errorf("bad float")
	}
	return n.Value, nil
}

// constrain applies the field's enum, minimum, exclusiveMinimum and maximum
// tags to a decoded scalar.
func (d *decoder) constrain(n *yaml.Node, path string, v reflect.Value, field *reflect.StructField) {
	if enum := field.Tag.Get("enum"); enum != "" && v.Kind() == reflect.String {
		words := strings.Split(enum, ",")
		s := v.String()
		for _, w := range words {
			if s == w {
				return
			}
		}
		hint := ""
		if near := suggest.Closest(s, words, 1); len(near) > 0 {
			hint = "did you mean " + suggest.Quote(near) + "?"
		}
		d.fail(n, path, hint, "%q is not one of %s", s, strings.Join(words, ", "))
		return
	}
	var x float64
	switch {
	case v.CanInt():
		x = float64(v.Int())
	case v.CanFloat():
		x = v.Float()
	case v.Type() == durationType:
		return
	default:
		return
	}
	if s := field.Tag.Get("minimum"); s != "" {
		if lim, _ := strconv.ParseFloat(s, 64); x < lim {
			d.fail(n, path, "", "must be at least %s, got %s", s, n.Value)
			return
		}
	}
	if s := field.Tag.Get("exclusiveMinimum"); s != "" {
		if lim, _ := strconv.ParseFloat(s, 64); x <= lim {
			d.fail(n, path, "", "must be greater than %s, got %s", s, n.Value)
			return
		}
	}
	if s := field.Tag.Get("maximum"); s != "" {
		if lim, _ := strconv.ParseFloat(s, 64); x > lim {
			d.fail(n, path, "", "must be at most %s, got %s", s, n.Value)
			return
		}
	}
}

// decodeNode accepts "input_tokens: 256" as shorthand for {mean: 256}.
func (l *Length) decodeNode(d *decoder, n *yaml.Node, path string) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!int" {
		f, _ := reflect.TypeOf(Length{}).FieldByName("Mean")
		d.value(n, joinPath(path, "mean"), reflect.ValueOf(&l.Mean).Elem(), &f)
		return
	}
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "write a number of tokens, or {mean: 256, stddev: 32}, or {values: [128, 256]}",
			"expected a token length, got %s", describe(n))
		return
	}
	d.structValue(n, path, reflect.ValueOf(l).Elem())
}

// sortedKeys returns a map's keys in order, for deterministic iteration.
func sortedKeys[M ~map[string]V, V any](m M) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
