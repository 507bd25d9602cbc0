package dashboard

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/duroxide/duroxide-go/provider"
)

// Chart geometry, in SVG user units.
const (
	chartWidth  = 600.0
	chartHeight = 120.0
)

// healthView is the health page's data.
type healthView struct {
	Latest   *sample
	Depths   *chart
	Finished *chart
	// Window is the time the samples cover.
	Window  time.Duration
	Samples int
	Counts  []stateCount
}

// chart is a line chart of one or more series over the samples.
type chart struct {
	// Label is the chart's accessible name: what it shows and its last
	// values, in words.
	Label  string
	Series []series
	Max    float64
	Width  float64
	Height float64
}

// series is one line.
type series struct {
	Name   string
	Class  string
	Points string
	Last   float64
}

// healthPage serves GET /health: queue depths and throughput over the
// samples the sampler holds.
func (d *Dashboard) healthPage(w http.ResponseWriter, r *http.Request) error {
	ss := d.sampler.samples()
	v := &healthView{Samples: len(ss)}
	if len(ss) > 0 {
		v.Latest = &ss[len(ss)-1]
		v.Window = ss[len(ss)-1].At.Sub(ss[0].At)
		for _, st := range states {
			v.Counts = append(v.Counts, stateCount{State: st, Count: v.Latest.count(st), URL: "/?state=" + string(st)})
		}
	}
	depth := func(f func(*provider.QueueDepths) int64) []float64 {
		out := make([]float64, len(ss))
		for i := range ss {
			out[i] = float64(f(&ss[i].Depths))
		}
		return out
	}
	v.Depths = newChart([]string{"orchestrator queue (ready)", "worker queue (ready)", "activities running"}, []string{"s1", "s2", "s3"},
		depth(func(q *provider.QueueDepths) int64 { return q.OrchestratorReady }),
		depth(func(q *provider.QueueDepths) int64 { return q.WorkerReady }),
		depth(func(q *provider.QueueDepths) int64 { return q.WorkerLocked }))
	v.Finished = newChart([]string{"instances finished per second"}, []string{"s1"}, finishRates(ss))
	v.Depths.describe("Queue depth", v.Window)
	v.Finished.describe("Throughput", v.Window)
	d.render(w, r, http.StatusOK, "health", v)
	return nil
}

// finishRates returns, for each sample after the first, the instances
// finished per second since the previous count: samples that reuse a
// count (see countsCostFactor) get the rate of the next fresh count, so
// the line keeps one point per sample.
func finishRates(ss []sample) []float64 {
	if len(ss) < 2 {
		return nil
	}
	rate := make([]float64, len(ss)-1)
	start := 0 // the sample of the previous count
	for i := 1; i < len(ss); i++ {
		if !ss[i].CountedAt.After(ss[start].CountedAt) {
			continue
		}
		r := 0.0
		if dt := ss[i].CountedAt.Sub(ss[start].CountedAt).Seconds(); dt > 0 {
			// Purges lower the count: a negative rate is no throughput.
			r = max(float64(ss[i].finished()-ss[start].finished())/dt, 0)
		}
		for j := start; j < i; j++ {
			rate[j] = r
		}
		start = i
	}
	return rate
}

// newChart scales the series (all of one length) into the chart's box.
func newChart(names, classes []string, data ...[]float64) *chart {
	c := &chart{Width: chartWidth, Height: chartHeight, Max: 1}
	for _, ys := range data {
		for _, y := range ys {
			c.Max = max(c.Max, y)
		}
	}
	c.Max = round2(c.Max)
	for i, ys := range data {
		s := series{Name: names[i], Class: classes[i]}
		var pts []string
		for j, y := range ys {
			x := 0.0
			if len(ys) > 1 {
				x = chartWidth * float64(j) / float64(len(ys)-1)
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, chartHeight-y/c.Max*(chartHeight-4)))
		}
		if len(ys) > 0 {
			s.Last = round2(ys[len(ys)-1])
		}
		s.Points = strings.Join(pts, " ")
		c.Series = append(c.Series, s)
	}
	return c
}

// describe sets the chart's accessible name: "Queue depth over the last
// 10m 0s, oldest to newest, up to 3: orchestrator queue (ready) now 0, ...".
func (c *chart) describe(title string, window time.Duration) {
	parts := make([]string, 0, len(c.Series))
	for _, s := range c.Series {
		parts = append(parts, fmt.Sprintf("%s now %v", s.Name, s.Last))
	}
	c.Label = fmt.Sprintf("%s over the last %s, oldest to newest, up to %v: %s", title, humanDuration(window), c.Max, strings.Join(parts, ", "))
}
