package dispatch

import (
	"fmt"
	"slices"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/internal/logkey"
	"github.com/duroxide/duroxide-go/provider"
)

// ActivityLister is a Registry that can list its activity names; the
// runtime then fetches only those (provider.WorkFetchOptions.Activities).
// A Registry without it fetches every name.
type ActivityLister interface {
	ActivityNames() []string
}

// activityNames returns the names to fetch (nil: any).
func (r *Runtime) activityNames() []string {
	if l, ok := r.reg.(ActivityLister); ok {
		if names := l.ActivityNames(); names != nil {
			return names
		}
		return []string{}
	}
	return nil
}

// OrchestrationLister is a Registry that can list its orchestration
// names; the runtime then fetches only the turns of those
// (provider.FetchOptions.Orchestrations) and announces them. A Registry
// without it fetches every name.
type OrchestrationLister interface {
	OrchestrationNames() []string
}

// orchestrationNames returns the orchestration names to fetch (nil: any).
func (r *Runtime) orchestrationNames() []string {
	if l, ok := r.reg.(OrchestrationLister); ok {
		if names := l.OrchestrationNames(); names != nil {
			return names
		}
		return []string{}
	}
	return nil
}

// OrchestrationVersionLister is an OrchestrationLister that can list the
// versions it registers of each orchestration; the runtime then fetches
// only the instances pinned to those versions, and those not pinned yet
// (provider.FetchOptions.OrchestrationVersions), and announces them.
type OrchestrationVersionLister interface {
	OrchestrationVersions() map[string][]string
}

// orchestrationVersions returns the versions of each orchestration to
// fetch (nil: any).
func (r *Runtime) orchestrationVersions() map[string][]string {
	if l, ok := r.reg.(OrchestrationVersionLister); ok {
		return l.OrchestrationVersions()
	}
	return nil
}

// orchestrationFetch is a fetch of turns of what this runtime registers.
func (r *Runtime) orchestrationFetch(max int) *provider.FetchOptions {
	opts := &provider.FetchOptions{LockTimeout: r.o.OrchestratorLockTimeout, Max: max, Orchestrations: r.orchestrationNames()}
	if opts.Orchestrations != nil {
		opts.OrchestrationVersions = r.orchestrationVersions()
	}
	return opts
}

// serves reports whether this runtime serves queue q.
func (r *Runtime) serves(q string) bool {
	if len(r.o.Queues) == 0 {
		return q == ""
	}
	return slices.Contains(r.o.Queues, q)
}

// routeTTL is how long an announcement of this runtime's routes lasts;
// it is renewed every third of it.
func (r *Runtime) routeTTL() time.Duration { return r.o.WorkerLockTimeout }

// announce records this runtime's routes in the store, if it keeps them.
func (r *Runtime) announce() {
	rt, ok := r.p.(provider.Router)
	if !ok {
		return
	}
	queues := r.o.Queues
	if len(queues) == 0 {
		queues = []string{""}
	}
	names := r.activityNames()
	if names == nil {
		names = []string{}
	}
	orch := r.orchestrationFetch(0)
	err := rt.AnnounceRoutes(r.io, provider.WorkerRoutes{WorkerID: r.o.WorkerID, Activities: names, Queues: queues,
		Orchestrations: orch.Orchestrations, OrchestrationVersions: orch.OrchestrationVersions}, r.routeTTL())
	if err != nil {
		r.log.Warn("announcing this runtime's orchestrations, activities and queues failed", logkey.Worker, r.o.WorkerID, logkey.Error, err)
	}
}

// withdraw forgets this runtime's routes (Shutdown). After the first
// Shutdown finished, r.io is stopped and the routes are already gone: a
// later Shutdown does nothing here.
func (r *Runtime) withdraw() {
	if r.io.Err() != nil {
		return
	}
	if rt, ok := r.p.(provider.Router); ok {
		if err := rt.WithdrawRoutes(r.io, r.o.WorkerID); err != nil {
			r.log.Warn("withdrawing this runtime's routes failed; they lapse", logkey.Worker, r.o.WorkerID, logkey.Error, err)
		}
	}
}

// maintainRoutes renews this runtime's announcement and, with an
// UnservedTimeout, fails the work no live runtime has served for that
// long.
func (r *Runtime) maintainRoutes() {
	defer r.loops.Done()
	every := max(r.routeTTL()/3, 10*time.Millisecond)
	for r.sleep(every, nil) {
		r.announce()
		if r.o.UnservedTimeout > 0 {
			r.failUnserved()
			r.failUnservedTurns()
		}
	}
}

// failUnserved fails, as kind "configuration", the activities that have
// waited UnservedTimeout with no live runtime serving their name and
// queue.
func (r *Runtime) failUnserved() {
	rt, ok := r.p.(provider.Router)
	if !ok {
		return
	}
	leases, err := rt.FetchUnservedWorkItems(r.io, r.o.UnservedTimeout, r.o.WorkerLockTimeout, r.o.FetchBatch)
	if err != nil {
		r.log.Warn("looking for unserved activities failed", logkey.Error, err)
		return
	}
	for _, l := range leases {
		r.log.Error("activity unserved; failing it", logkey.Instance, l.InstanceID, logkey.ActivityID, l.ActivityID,
			logkey.Activity, l.Item.Name)
		fail := &history.ErrorDetails{Kind: history.ErrorConfiguration,
			Message: fmt.Sprintf("%s for %s (UnservedTimeout)", Unserved(l.Item.Name, l.Item.Queue), r.o.UnservedTimeout)}
		r.ackActivity(l, activityCompletion(l, nil, fail, l.Item.Data))
	}
}

// failUnservedTurns fails, as kind "configuration", the instances that
// have been ready for UnservedTimeout with no live runtime registering
// their orchestration. The store locks them without counting a delivery;
// each is failed by a turn run here (turn.Policy.Unserved), or runs as
// usual should this runtime register it after all.
func (r *Runtime) failUnservedTurns() {
	rt, ok := r.p.(provider.Router)
	if !ok {
		return
	}
	items, err := rt.FetchUnservedOrchestrationItems(r.io, r.o.UnservedTimeout, r.o.OrchestratorLockTimeout, r.o.FetchBatch)
	if err != nil {
		r.log.Warn("looking for unserved orchestrations failed", logkey.Error, err)
		return
	}
	for _, it := range items {
		var name, version string
		if it.Instance != nil { // always: the store returns only instances with a name
			name, version = it.Instance.OrchestrationName, it.Instance.OrchestrationVersion
		}
		what := name
		if version != "" {
			what += " version " + version
		}
		r.log.Error("orchestration unserved; failing the instance", logkey.Instance, it.InstanceID, logkey.Orchestration, what)
		start := time.Now() // real time, even under a fake clock: metrics measure work
		res, leased := r.runTurnWith(it, fmt.Sprintf("%s for %s (UnservedTimeout)", UnservedOrchestration(name, version), r.o.UnservedTimeout))
		r.metrics.observeTurn(res, time.Since(start))
		r.startActivities(leased)
	}
}

// UnservedOrchestration says that no runtime registers orchestration
// name, in version when the instance is pinned to one (version "": any).
func UnservedOrchestration(name, version string) string {
	if version != "" {
		return "no runtime registers orchestration " + name + " version " + version
	}
	return "no runtime registers orchestration " + name
}

// Unserved says that no runtime serves activity name in queue.
func Unserved(name, queue string) string {
	return fmt.Sprintf("no runtime serves activity %s (queue %q)", name, queue)
}
