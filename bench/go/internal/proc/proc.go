// Package proc reads this process's CPU time and memory from /proc, as kcr-bench reads them
// (bench/e2e/src/lib.rs), so that the Go peers and the Rust runs measure alike.
package proc

import (
	"math"
	"os"
	"strconv"
	"strings"
)

// CPUSecs is this process's CPU time so far (user + system ticks of /proc/self/stat, 100 per
// second); NaN when unreadable.
func CPUSecs() float64 {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return math.NaN()
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return math.NaN()
	}
	utime, err1 := strconv.ParseUint(fields[11], 10, 64)
	stime, err2 := strconv.ParseUint(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return math.NaN()
	}
	return float64(utime+stime) / 100
}

// StatusMiB is a kB line of /proc/self/status (field without its colon, such as VmHWM or
// VmRSS) in MiB; NaN when unreadable.
func StatusMiB(field string) float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return math.NaN()
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kib, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			if err != nil {
				return math.NaN()
			}
			return kib / 1024
		}
	}
	return math.NaN()
}
