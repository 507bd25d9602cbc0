package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// A key template builds an instance ID, a lock key or an idempotency key
// of a webhook call from the request. It is text with placeholders:
//
//	{/json/pointer}   the string or number at an RFC 6901 pointer in the body
//	{header:Name}     the value of a request header
//	{{ and }}         a literal { and }
//
// "order-{/data/object/id}" or "gh-{header:X-GitHub-Delivery}". A template
// without placeholders is a constant. Templates are parsed when the
// triggers are loaded, so a bad one is refused then, not at the first call.
type keyTemplate struct {
	src   string
	parts []templatePart
}

// templatePart is a constant (text) or a placeholder: a body value
// (pointer) or a header (header).
type templatePart struct {
	text    string
	pointer []string
	header  string
	// source is the placeholder as a message names it: "/data/object/id
	// in the body", "header X-GitHub-Delivery".
	source string
}

// maxTemplateParts bounds the placeholders and constants of a template.
const maxTemplateParts = 32

// parseTemplate parses a key template (see keyTemplate).
func parseTemplate(src string) (*keyTemplate, error) {
	t := &keyTemplate{src: src}
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			t.parts = append(t.parts, templatePart{text: text.String()})
			text.Reset()
		}
	}
	for i := 0; i < len(src); {
		switch c := src[i]; {
		case c == '{' && strings.HasPrefix(src[i:], "{{"):
			text.WriteByte('{')
			i += 2
		case c == '}' && strings.HasPrefix(src[i:], "}}"):
			text.WriteByte('}')
			i += 2
		case c == '}':
			return nil, fmt.Errorf("template %q: \"}\" at byte %d closes nothing; write \"}}\" for a literal \"}\"", src, i)
		case c == '{':
			end := strings.IndexByte(src[i:], '}')
			if end < 0 {
				return nil, fmt.Errorf("template %q: \"{\" at byte %d is not closed; write \"{{\" for a literal \"{\"", src, i)
			}
			p, err := parsePlaceholder(src[i+1 : i+end])
			if err != nil {
				return nil, fmt.Errorf("template %q: %w", src, err)
			}
			flush()
			t.parts = append(t.parts, p)
			i += end + 1
		default:
			text.WriteByte(c)
			i++
		}
	}
	flush()
	if len(t.parts) > maxTemplateParts {
		return nil, fmt.Errorf("template %q has %d parts; the limit is %d", src, len(t.parts), maxTemplateParts)
	}
	return t, nil
}

func parsePlaceholder(p string) (templatePart, error) {
	switch {
	case strings.HasPrefix(p, "/"):
		tokens, err := parsePointer(p)
		if err != nil {
			return templatePart{}, err
		}
		return templatePart{pointer: tokens, source: p + " in the body"}, nil
	case strings.HasPrefix(p, "header:"):
		name := p[len("header:"):]
		if !validHeaderName(name) {
			return templatePart{}, fmt.Errorf("{%s}: %q is not a header name", p, name)
		}
		return templatePart{header: http.CanonicalHeaderKey(name), source: "header " + name}, nil
	}
	return templatePart{}, fmt.Errorf("unknown placeholder {%s}: use {/json/pointer} for a value of the body or {header:Name} for a header", p)
}

// constant reports whether t has no placeholders, and its text.
func (t *keyTemplate) constant() (string, bool) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.source != "" {
			return "", false
		}
		b.WriteString(p.text)
	}
	return b.String(), true
}

// keyField names the value a template builds, for the answers of a call
// whose value is missing or invalid.
type keyField struct {
	// what is "instance ID", "lock key" or "idempotency key".
	what string
	// option is the trigger field holding the template.
	option string
}

// callRequest is what a template reads from a webhook call: its headers
// and its body, decoded (with UseNumber) on first use.
type callRequest struct {
	header  http.Header
	body    []byte
	doc     any
	decoded bool
}

func (c *callRequest) document() (any, error) {
	if !c.decoded {
		if len(c.body) > 0 {
			dec := json.NewDecoder(bytes.NewReader(c.body))
			dec.UseNumber()
			if err := dec.Decode(&c.doc); err != nil {
				return nil, badRequest("malformed JSON", "%v", err)
			}
		}
		c.decoded = true
	}
	return c.doc, nil
}

// render builds the value of t for the call of trigger triggerID. A
// placeholder without a value, or with a value that is not a non-empty
// string or a number, is a 400 naming the field and the placeholder.
// Numbers are written as in the body (json.Number), never reformatted.
func (t *keyTemplate) render(c *callRequest, triggerID string, f keyField) (string, error) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.source == "" {
			b.WriteString(p.text)
			continue
		}
		v, err := p.value(c)
		if err != nil {
			switch {
			case errors.Is(err, errNoValue):
				return "", badRequest("missing "+f.what,
					"trigger %s takes its %s from %s (%s %q), which has no value in this call", triggerID, f.what, p.source, f.option, t.src)
			case errors.Is(err, errEmptyValue):
				return "", badRequest("missing "+f.what,
					"trigger %s takes its %s from %s (%s %q), which is empty in this call", triggerID, f.what, p.source, f.option, t.src)
			}
			var ae *apiError
			if errors.As(err, &ae) && ae.message == "malformed JSON" {
				return "", err
			}
			return "", badRequest("invalid "+f.what, "trigger %s takes its %s from %s (%s %q): %v", triggerID, f.what, p.source, f.option, t.src, err)
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

// errEmptyValue reports a placeholder whose value is an empty string.
var errEmptyValue = errors.New("empty value")

// value is the text of placeholder p in the call: errNoValue when absent,
// errEmptyValue when empty.
func (p *templatePart) value(c *callRequest) (string, error) {
	if p.header != "" {
		vs := c.header.Values(p.header)
		switch {
		case len(vs) > 1:
			return "", fmt.Errorf("the header appears %d times; send it once", len(vs))
		case len(vs) == 0:
			return "", errNoValue
		case vs[0] == "":
			return "", errEmptyValue
		}
		return vs[0], nil
	}
	doc, err := c.document()
	if err != nil {
		return "", err
	}
	v, err := lookupPointer(doc, p.pointer)
	if err != nil {
		return "", err
	}
	switch v := v.(type) {
	case string:
		if v == "" {
			return "", errEmptyValue
		}
		return v, nil
	case json.Number:
		return v.String(), nil
	}
	return "", fmt.Errorf("the value must be a string or a number, got %s", jsonKind(v))
}
