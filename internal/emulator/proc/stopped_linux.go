package proc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// groupStopped reports whether every thread of every process in process
// group pgid is stopped (state T or t in /proc/<pid>/task/<tid>/stat) or
// already dead (Z, X). A group with no process left is an error.
func groupStopped(pgid int) (bool, error) {
	pids, err := groupMembers(pgid)
	if err != nil {
		return false, err
	}
	if len(pids) == 0 {
		return false, fmt.Errorf("process group %d has no process", pgid)
	}
	for _, pid := range pids {
		tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "stat"))
		if err != nil {
			return false, err
		}
		for _, f := range tasks {
			st, err := readStat(f)
			if errors.Is(err, fs.ErrNotExist) {
				continue // the thread has exited
			}
			if err != nil {
				return false, err
			}
			switch st.state {
			case 'T', 't', 'Z', 'X':
			default:
				return false, nil
			}
		}
	}
	return true, nil
}

// groupMembers lists the processes whose process group is pgid.
func groupMembers(pgid int) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone, or not ours to read
		}
		if st.pgrp == pgid {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// stat is the part of a /proc stat line groupStopped reads.
type stat struct {
	state byte
	pgrp  int
}

// readStat parses the state and process group of a /proc stat file (the
// fields after the parenthesised command name, which may hold spaces).
func readStat(path string) (stat, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return stat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return stat{}, fmt.Errorf("%s: no command name", path)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return stat{}, fmt.Errorf("%s: short stat line", path)
	}
	pgrp, err := strconv.Atoi(f[2])
	if err != nil {
		return stat{}, fmt.Errorf("%s: process group: %w", path, err)
	}
	return stat{state: f[0][0], pgrp: pgrp}, nil
}
