package dashboard_test

import (
	"testing"

	"github.com/duroxide/duroxide-go"
)

// TestInstancePageShowsValues: the instance page lists the values an
// instance set, escaped; an instance without values has no section.
func TestInstancePageShowsValues(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{register: func(reg *duroxide.Registry) {
		duroxide.RegisterOrchestration(reg, "test.Values", func(ctx *duroxide.OrchestrationContext, in string) (string, error) {
			if err := ctx.SetValue("stage", in); err != nil {
				return "", err
			}
			return in, ctx.SetValue("<b>key</b>", 42)
		})
	}})
	e.start(t, "v1", "test.Values", "<script>alert(1)</script>", true)
	p := e.get(t, "/instances/v1")
	mustContain(t, p, `<section id="values">`, "&lt;b&gt;key&lt;/b&gt;", "&#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;", ">42</pre>")
	mustNotContain(t, p, "<script>alert", "<b>key</b>")
	e.start(t, "h1", "demo.Hello", "Ada", true)
	mustNotContain(t, e.get(t, "/instances/h1"), `<section id="values">`)
}
