package dispatch

import (
	"testing"
	"time"
)

// TestDefaultsFillZeroOptions: zero concurrency and batch options take the
// documented defaults, and set ones are kept.
func TestDefaultsFillZeroOptions(t *testing.T) {
	o := Options{OrchestratorLockTimeout: time.Second, WorkerLockTimeout: time.Second}
	if err := o.fill(); err != nil {
		t.Fatal(err)
	}
	if o.WorkerConcurrency != DefaultWorkerConcurrency || o.FetchBatch != DefaultFetchBatch {
		t.Fatalf("defaults: WorkerConcurrency %d, FetchBatch %d; want %d, %d",
			o.WorkerConcurrency, o.FetchBatch, DefaultWorkerConcurrency, DefaultFetchBatch)
	}
	if DefaultWorkerConcurrency != 512 || DefaultFetchBatch != 32 {
		t.Fatalf("the README and RuntimeOptions document 512 and 32; the defaults are %d and %d",
			DefaultWorkerConcurrency, DefaultFetchBatch)
	}
	o = Options{OrchestratorLockTimeout: time.Second, WorkerLockTimeout: time.Second, WorkerConcurrency: 3, FetchBatch: 2}
	if err := o.fill(); err != nil {
		t.Fatal(err)
	}
	if o.WorkerConcurrency != 3 || o.FetchBatch != 2 {
		t.Fatalf("set options changed: %d, %d", o.WorkerConcurrency, o.FetchBatch)
	}
}
