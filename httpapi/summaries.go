package httpapi

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/duroxide/duroxide-go"
)

// Limits of list answers. Lists return summaries: the potentially large
// fields (inputs, outputs, custom statuses) only when asked for with
// ?include=, each up to MaxIncludedFieldBytes.
const (
	// DefaultListLimit is the page size of GET /api/instances without ?limit.
	DefaultListLimit = 100
	// MaxListLimit is the largest ?limit of GET /api/instances.
	MaxListLimit = 1000
	// MaxListLimitWithPayloads is the largest ?limit of GET /api/instances
	// with ?include=.
	MaxListLimitWithPayloads = 100
	// MaxIncludedFieldBytes caps each included field of a list item (input,
	// output, custom status): a larger one is left out and named in the
	// item's "truncated" list; GET /api/instances/{id} has it in full.
	MaxIncludedFieldBytes = 64 << 10
	// maxSummaryMessageBytes caps the error messages of list items; their
	// details (stack traces) are left out of lists.
	maxSummaryMessageBytes = 1 << 10
	// listChunk is how many instances the list reads from the store at a
	// time.
	listChunk = 32
)

// Values of ?include=.
const (
	includeInput        = "input"
	includeOutput       = "output"
	includeCustomStatus = "customStatus"
)

// parseInclude reads ?include=, a comma-separated list of allowed fields.
func parseInclude(v string, allowed ...string) (map[string]bool, error) {
	inc := map[string]bool{}
	for f := range strings.SplitSeq(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !slices.Contains(allowed, f) {
			return nil, badRequest("invalid include", "include is a comma-separated list of %s; got %q", strings.Join(allowed, ", "), f)
		}
		inc[f] = true
	}
	return inc, nil
}

// instanceListResponse is the body of GET /api/instances.
type instanceListResponse struct {
	Instances  []instanceSummary `json:"instances"`
	NextCursor string            `json:"nextCursor,omitempty"`
}

// instanceSummary is a list item: duroxide.Status without the fields not
// asked for, and Truncated naming the fields left out or shortened because
// of their size.
type instanceSummary struct {
	duroxide.Status
	Truncated []string `json:"truncated,omitempty"`
}

// summarize makes the list item of st with the included fields.
func summarize(st *duroxide.Status, inc map[string]bool) instanceSummary {
	sum := instanceSummary{Status: *st}
	sum.Input = sum.includeField(includeInput, st.Input, inc)
	sum.Output = sum.includeField(includeOutput, st.Output, inc)
	sum.CustomStatus = sum.includeField(includeCustomStatus, st.CustomStatus, inc)
	sum.Error = sum.summarizeError("error", st.Error)
	sum.LastError = sum.summarizeError("lastError", st.LastError)
	return sum
}

// includeField returns v if it is included and within the cap; a capped
// one is named in Truncated.
func (s *instanceSummary) includeField(name string, v json.RawMessage, inc map[string]bool) json.RawMessage {
	return includePayload(name, v, inc, &s.Truncated)
}

func includePayload(name string, v json.RawMessage, inc map[string]bool, truncated *[]string) json.RawMessage {
	switch {
	case !inc[name] || v == nil:
		return nil
	case len(v) > MaxIncludedFieldBytes:
		*truncated = append(*truncated, name)
		return nil
	}
	return v
}

// summarizeError copies e without its details and with its message capped;
// a capped message is named in Truncated.
func (s *instanceSummary) summarizeError(name string, e *duroxide.ErrorInfo) *duroxide.ErrorInfo {
	if e == nil {
		return nil
	}
	c := *e
	c.Details = ""
	if len(c.Message) > maxSummaryMessageBytes {
		c.Message = truncateUTF8(c.Message, maxSummaryMessageBytes)
		s.Truncated = append(s.Truncated, name)
	}
	return &c
}

// truncateUTF8 shortens s to at most n bytes without splitting a
// character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
