package record

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// decoderTree is the expansion's parse through json.Decoder, which treeScanner
// replaced: the reference FuzzScanTree compares it with.
func decoderTree(p []byte) (*node, error) {
	d := json.NewDecoder(bytes.NewReader(p))
	d.UseNumber()
	return decoderNode(d)
}

func decoderNode(d *json.Decoder) (*node, error) {
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch v := t.(type) {
	case json.Delim:
		switch v {
		case '{':
			n := &node{kind: kStruct}
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, err
				}
				name, _ := kt.(string)
				kid, err := decoderNode(d)
				if err != nil {
					return nil, err
				}
				replaced := false
				for i, have := range n.names {
					if have == name {
						n.kids[i], replaced = kid, true
						break
					}
				}
				if !replaced {
					n.names = append(n.names, name)
					n.kids = append(n.kids, kid)
				}
			}
			_, err := d.Token()
			return n, err
		case '[':
			n := &node{kind: kArray}
			for d.More() {
				kid, err := decoderNode(d)
				if err != nil {
					return nil, err
				}
				n.kids = append(n.kids, kid)
			}
			_, err := d.Token()
			return n, err
		}
	case string:
		return &node{kind: kString, text: v}, nil
	case bool:
		return &node{kind: kBool, b: v}, nil
	case nil:
		return &node{kind: kBytes}, nil
	case json.Number:
		return numberNode(string(v), !strings.ContainsAny(string(v), ".eE"))
	}
	return nil, errNotExpandable
}

// FuzzScanTree: treeScanner parses what json.Decoder parsed, into the same nodes,
// and refuses what it refused.
func FuzzScanTree(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":[1,2.5,"x",null,true,false,{"b":{}}],"a":-0.1e3}`, `{"s":"\u00e9\ud83d\ude00\n"}`,
		`{"n":12345678901234567890123}`, `{"a":1,}`, `{"a" 1}`, `{"a":01}`, `{"a":tru}`, `{"a":"\x"}`, "{\"a\":\"\xff\"}", `{"a":1} x`, `{}`, `{"a":[]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		want, wantErr := decoderTree(p)
		got, gotErr := parseTree(p)
		if (wantErr != nil) != (gotErr != nil) {
			t.Fatalf("%q: json.Decoder error %v, treeScanner error %v", p, wantErr, gotErr)
		}
		if wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: json.Decoder %+v, treeScanner %+v", p, want, got)
		}
	})
}
