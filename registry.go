package duroxide

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"golang.org/x/mod/semver"
)

// DefaultVersion is the version RegisterOrchestration registers under.
const DefaultVersion = "1.0.0"

// reservedPrefix starts names the runtime keeps for itself.
const reservedPrefix = "__duroxide"

type orchestrationFunc func(ctx *OrchestrationContext, input json.RawMessage) (json.RawMessage, error)

type activityFunc func(ctx context.Context, input json.RawMessage) (json.RawMessage, error)

// Registry maps orchestration and activity names to the Go functions that
// run them. Orchestrations are versioned (semantic versions, "1.2.3"); an
// instance is pinned to the version it started with, and new instances get
// the latest version unless SetDefaultVersion says otherwise. Register
// everything before StartRuntime; registration mistakes (a duplicate name,
// a bad version, an empty name) are collected and returned by Err and by
// StartRuntime.
type Registry struct {
	mu             sync.RWMutex
	orchestrations map[string]map[string]orchestrationFunc // name -> version -> fn
	defaults       map[string]string
	activities     map[string]activityFunc
	errs           []error
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{
		orchestrations: map[string]map[string]orchestrationFunc{},
		defaults:       map[string]string{},
		activities:     map[string]activityFunc{},
	}
}

// RegisterOrchestration registers fn as version DefaultVersion ("1.0.0") of
// the orchestration name. Input and output are JSON-encoded. It returns a
// typed reference for CallSubOrchestration, StartTyped and WaitTyped,
// unpinned: it starts the version new instances get (callers may ignore
// it).
func RegisterOrchestration[I, O any](reg *Registry, name string, fn func(ctx *OrchestrationContext, input I) (O, error)) Orchestration[I, O] {
	RegisterOrchestrationVersion(reg, name, DefaultVersion, fn)
	return Orchestration[I, O]{name: name}
}

// RegisterOrchestrationVersion registers fn as the given semantic version of
// the orchestration name. It returns a typed reference pinned to that
// version (see Orchestration.WithVersion to unpin it).
func RegisterOrchestrationVersion[I, O any](reg *Registry, name, version string, fn func(ctx *OrchestrationContext, input I) (O, error)) Orchestration[I, O] {
	ref := Orchestration[I, O]{name: name, version: version}
	if fn == nil {
		reg.fail(fmt.Errorf("orchestration %q: nil function", name))
		return ref
	}
	reg.addOrchestration(name, version, func(ctx *OrchestrationContext, raw json.RawMessage) (json.RawMessage, error) {
		var in I
		if err := decodePayload(raw, &in); err != nil {
			return nil, fmt.Errorf("decoding input of orchestration %s: %w", name, err)
		}
		out, err := fn(ctx, in)
		if err != nil {
			return nil, err
		}
		return encodePayload(out)
	})
	return ref
}

// RegisterActivity registers fn as the activity name. Its context is
// canceled when the activity is canceled (its orchestration ended or was
// canceled or gave up on it, its lock was lost, or the runtime is shutting
// down past its deadline); ActivityContextFrom(ctx) describes the call. An
// error or a panic becomes an *ActivityError in the orchestration; an
// error wrapped with NonRetryable ends its retries. It returns a typed
// reference for CallActivity (callers may ignore it).
func RegisterActivity[I, O any](reg *Registry, name string, fn func(ctx context.Context, input I) (O, error)) Activity[I, O] {
	ref := Activity[I, O]{name: name}
	if fn == nil {
		reg.fail(fmt.Errorf("activity %q: nil function", name))
		return ref
	}
	reg.addActivity(name, func(ctx context.Context, raw json.RawMessage) (json.RawMessage, error) {
		var in I
		if err := decodePayload(raw, &in); err != nil {
			return nil, fmt.Errorf("decoding input of activity %s: %w", name, err)
		}
		out, err := fn(ctx, in)
		if err != nil {
			return nil, err
		}
		return encodePayload(out)
	})
	return ref
}

// SetDefaultVersion makes version the one new instances of name start with
// (instead of the latest registered). The version must be registered by the
// time the runtime starts.
func (r *Registry) SetDefaultVersion(name, version string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.defaults[name] = version
}

// Err returns the registration mistakes made so far, joined, or nil.
func (r *Registry) Err() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	errs := append([]error(nil), r.errs...)
	for name, v := range r.defaults {
		if _, ok := r.orchestrations[name][v]; !ok {
			errs = append(errs, fmt.Errorf("orchestration %q: default version %q is not registered", name, v))
		}
	}
	return errors.Join(errs...)
}

// Orchestrations lists the registered orchestration names, sorted.
func (r *Registry) Orchestrations() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.orchestrations))
}

// Versions lists the registered versions of an orchestration, oldest first.
func (r *Registry) Versions(name string) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.SortedFunc(maps.Keys(r.orchestrations[name]), func(a, b string) int {
		return semver.Compare("v"+a, "v"+b)
	})
}

// orchestrationVersions maps each registered orchestration to its
// versions.
func (r *Registry) orchestrationVersions() map[string][]string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[string][]string, len(r.orchestrations))
	for name, vs := range r.orchestrations {
		out[name] = slices.Collect(maps.Keys(vs))
	}
	return out
}

// HasOrchestration reports whether name is registered at version, or,
// with version "", whether it has a version new instances start with (the
// default set by SetDefaultVersion, or the latest).
func (r *Registry) HasOrchestration(name, version string) bool {
	_, _, ok := r.orchestration(name, version)
	return ok
}

// Activities lists the registered activity names, sorted.
func (r *Registry) Activities() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.activities))
}

func (r *Registry) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func checkName(kind, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%s name is empty", kind)
	case strings.HasPrefix(name, reservedPrefix):
		return fmt.Errorf("%s name %q: the %q prefix is reserved", kind, name, reservedPrefix)
	}
	return nil
}

func (r *Registry) addOrchestration(name, version string, fn orchestrationFunc) {
	if err := checkName("orchestration", name); err != nil {
		r.fail(err)
		return
	}
	if !semver.IsValid("v"+version) || strings.Count(version, ".") < 2 {
		r.fail(fmt.Errorf("orchestration %q: version %q is not a semantic version like 1.2.3", name, version))
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	vs := r.orchestrations[name]
	if vs == nil {
		vs = map[string]orchestrationFunc{}
		r.orchestrations[name] = vs
	}
	if _, dup := vs[version]; dup {
		r.errs = append(r.errs, fmt.Errorf("orchestration %q version %s is registered twice", name, version))
		return
	}
	vs[version] = fn
}

func (r *Registry) addActivity(name string, fn activityFunc) {
	if err := checkName("activity", name); err != nil {
		r.fail(err)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.activities[name]; dup {
		r.errs = append(r.errs, fmt.Errorf("activity %q is registered twice", name))
		return
	}
	r.activities[name] = fn
}

// orchestration resolves name at version ("" = the default for new
// instances) and returns the function and the resolved version.
func (r *Registry) orchestration(name, version string) (orchestrationFunc, string, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	vs := r.orchestrations[name]
	if len(vs) == 0 {
		return nil, "", false
	}
	if version == "" {
		version = r.defaults[name]
	}
	if version == "" {
		for v := range vs {
			if version == "" || semver.Compare("v"+v, "v"+version) > 0 {
				version = v
			}
		}
	}
	fn, ok := vs[version]
	return fn, version, ok
}

func (r *Registry) activity(name string) (activityFunc, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	fn, ok := r.activities[name]
	return fn, ok
}

// encodePayload JSON-encodes a value for storage; nil stays absent.
func encodePayload(v any) (json.RawMessage, error) {
	if raw, ok := v.(json.RawMessage); ok {
		if len(raw) == 0 {
			return nil, nil
		}
		if !json.Valid(raw) {
			return nil, fmt.Errorf("%w: payload is not valid JSON", ErrInvalidArgument)
		}
		return raw, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding payload: %v", ErrInvalidArgument, err)
	}
	if string(b) == "null" {
		return nil, nil
	}
	return b, nil
}

// decodePayload decodes a stored payload into out; an absent payload
// leaves out at its zero value, as does a nil out.
func decodePayload(raw json.RawMessage, out any) error {
	if out == nil || len(raw) == 0 {
		return nil
	}
	if p, ok := out.(*json.RawMessage); ok {
		*p = append((*p)[:0], raw...)
		return nil
	}
	return json.Unmarshal(raw, out)
}
