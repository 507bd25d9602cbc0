package bench

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
)

// The per-workload memory and I/O figures come from Linux's /proc; on other
// platforms they are omitted.

// freeMemory returns the garbage of earlier work to the OS, so that a
// workload's peak resident set is mostly its own.
func freeMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}

// resetPeakRSS resets the process's resident set high-water mark (VmHWM)
// to the current resident set, and reports whether it could.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSS returns the process's resident set high-water mark in bytes, or 0.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	kb, ok := procField(b, "VmHWM:")
	if !ok {
		return 0
	}
	return kb * 1024
}

// writtenBytes returns the bytes the process has passed to write-family
// system calls (wchar of /proc/self/io).
func writtenBytes() (int64, bool) {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, false
	}
	return procField(b, "wchar:")
}

// procField reads the number after key in a /proc key-value file.
func procField(b []byte, key string) (int64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if rest, found := strings.CutPrefix(line, key); found {
			f := strings.Fields(rest)
			if len(f) == 0 {
				return 0, false
			}
			v, err := strconv.ParseInt(f[0], 10, 64)
			return v, err == nil
		}
	}
	return 0, false
}
