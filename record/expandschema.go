package record

// appendSchema appends the schema inferred for an expanded payload as Kafka's
// JsonConverter.asJsonSchema writes it: type, then items (an array) or fields (a
// struct, each field's schema with its name last), then optional (every inferred
// schema is optional) and a struct's name. JsonSchemaData.toConnectSchema names a
// struct after its path from the payload column (payload, payload.customer); the
// elements of an array of objects take the array's path, the elements of any
// other array none, so structs below them are named from there on.
func appendSchema(b []byte, s *schema, path string, named bool) []byte {
	switch s.kind {
	case kString:
		return append(b, `{"type":"string","optional":true}`...)
	case kBool:
		return append(b, `{"type":"boolean","optional":true}`...)
	case kInt32:
		return append(b, `{"type":"int32","optional":true}`...)
	case kInt64:
		return append(b, `{"type":"int64","optional":true}`...)
	case kFloat64:
		return append(b, `{"type":"double","optional":true}`...)
	case kBytes:
		return append(b, `{"type":"bytes","optional":true}`...)
	case kArray:
		b = append(b, `{"type":"array","items":`...)
		if s.elem.kind == kStruct {
			b = appendSchema(b, s.elem, path, named)
		} else {
			b = appendSchema(b, s.elem, "", false)
		}
		return append(b, `,"optional":true}`...)
	}
	b = append(b, `{"type":"struct","fields":[`...)
	prefix := ""
	if named && !blank([]byte(path)) {
		prefix = path + "."
	}
	for i, f := range s.fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendSchema(b, f.s, prefix+f.name, true)
		b = append(b[:len(b)-1], `,"field":`...)
		b = append(appendJSONString(b, f.name), '}')
	}
	b = append(b, `],"optional":true`...)
	if named {
		b = append(b, `,"name":`...)
		b = appendJSONString(b, path)
	}
	return append(b, '}')
}
