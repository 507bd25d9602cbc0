package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/chromedp/chromedp"
)

// axeFile is axe-core's browser build, vendored (with its licence files)
// from the npm package axe-core at the version in testdata/axe-core/VERSION.
const axeFile = "testdata/axe-core/axe.min.js"

var axeSource = sync.OnceValues(func() (string, error) {
	b, err := os.ReadFile(axeFile)
	return string(b), err
})

// axeViolation is one rule axe-core found broken, with the elements that
// break it.
type axeViolation struct {
	ID      string `json:"id"`
	Impact  string `json:"impact"`
	Help    string `json:"help"`
	HelpURL string `json:"helpUrl"`
	Nodes   []struct {
		Target         []any  `json:"target"`
		HTML           string `json:"html"`
		FailureSummary string `json:"failureSummary"`
	} `json:"nodes"`
}

// checkAccessibility runs axe-core on the page the browser shows and fails
// the test (going on with the walk) on any serious or critical violation,
// printing each with the elements concerned. page names the page in the
// message.
func (b *browser) checkAccessibility(page string) {
	b.t.Helper()
	src, err := axeSource()
	if err != nil {
		b.t.Fatalf("reading %s: %v", axeFile, err)
	}
	ctx, cancel := context.WithTimeout(b.ctx, testTimeout)
	defer cancel()
	loaded, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`typeof window.axe === "object"`))
	if err != nil {
		b.t.Fatalf("%s: %v", page, err)
	}
	if !loaded {
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](src+"\n;true")); err != nil {
			b.t.Fatalf("%s: injecting axe-core: %v", page, err)
		}
	}
	// The live refresh may replace a section while axe walks the page;
	// a run that fails on that is run again.
	var out string
	for attempt := 1; ; attempt++ {
		out, err = chromedp.Run(ctx, chromedp.Evaluate[string](
			`axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(r.violations))`, chromedp.EvalAwaitPromise))
		if err == nil || attempt == 3 {
			break
		}
	}
	if err != nil {
		b.t.Fatalf("%s: running axe-core: %v", page, err)
	}
	var vs []axeViolation
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		b.t.Fatalf("%s: axe-core's answer: %v", page, err)
	}
	var bad []string
	for _, v := range vs {
		if v.Impact != "serious" && v.Impact != "critical" {
			continue
		}
		var s strings.Builder
		fmt.Fprintf(&s, "%s (%s): %s <%s>", v.ID, v.Impact, v.Help, v.HelpURL)
		for i, n := range v.Nodes {
			if i == 5 {
				fmt.Fprintf(&s, "\n    ... and %d more", len(v.Nodes)-5)
				break
			}
			fmt.Fprintf(&s, "\n    %v %s\n      %s", n.Target, n.HTML, strings.ReplaceAll(n.FailureSummary, "\n", "\n      "))
		}
		bad = append(bad, s.String())
	}
	if len(bad) > 0 {
		b.t.Errorf("axe-core: %d serious or critical accessibility violations on the %s page:\n  %s", len(bad), page, strings.Join(bad, "\n  "))
	}
}
