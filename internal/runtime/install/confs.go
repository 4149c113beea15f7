package install

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cnikit/cni/internal/chain"
	"github.com/cnikit/cni/internal/core/statedir"
)

// conf is one config file to install.
type conf struct {
	src, name string
	data      []byte
}

// confAction is what a run does with one config.
type confAction struct {
	conf
	target string
	write  bool // false: the file already holds these bytes
}

// readConfs reads and checks every config before anything changes: a runtime that
// finds an invalid file in its config directory may stop using the network. The lists
// of oneExec are wrapped into one chain plugin each, refused if a plugin is not one of
// builtIn.
func readConfs(paths, oneExec, builtIn []string) ([]conf, error) {
	var out []conf
	seen := map[string]string{}
	all := slices.Concat(paths, oneExec)
	for i, p := range all {
		flag := "--conf"
		if i >= len(paths) {
			flag = "--one-exec"
		}
		c := conf{src: p, name: filepath.Base(p)}
		if prev, ok := seen[c.name]; ok {
			return nil, fmt.Errorf("%s %s and %s would both be written as %s", flag, prev, p, c.name)
		}
		seen[c.name] = p
		if err := checkConfName(c.name); err != nil {
			return nil, fmt.Errorf("%s %s: %w", flag, p, err)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
		if i >= len(paths) {
			if data, err = wrapList(c.name, data, builtIn); err != nil {
				return nil, fmt.Errorf("%s %s: %w", flag, p, err)
			}
		}
		if err := checkConf(c.name, data); err != nil {
			return nil, fmt.Errorf("%s %s: %w", flag, p, err)
		}
		c.data = data
		out = append(out, c)
	}
	return out, nil
}

// wrapList is chain.WrapList for a config file: only a .conflist holds a list (a .conf
// or .json file is one plugin, which is one process already).
func wrapList(name string, data []byte, builtIn []string) ([]byte, error) {
	if filepath.Ext(name) != ".conflist" {
		return nil, errors.New("not a .conflist: a single plugin config is one process per operation already")
	}
	if len(data) > chain.MaxFileSize {
		return nil, fmt.Errorf("larger than %d bytes", chain.MaxFileSize)
	}
	return chain.WrapList(data, func(typ string) bool { return slices.Contains(builtIn, typ) })
}

// checkConfName accepts a plain file name in the config dir that runtimes load.
func checkConfName(name string) error {
	if name == "" || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("file name %q: not a plain file name", name)
	}
	if name[0] == '.' {
		return fmt.Errorf("file name %q: runtimes skip hidden files", name)
	}
	switch filepath.Ext(name) {
	case ".conflist", ".conf", ".json":
		return nil
	}
	return fmt.Errorf("file name %q: runtimes load only .conflist, .conf and .json files", name)
}

// checkConf parses a config the way the runtimes' loader (libcni) will.
func checkConf(name string, data []byte) error {
	if len(data) > chain.MaxFileSize {
		return fmt.Errorf("larger than %d bytes", chain.MaxFileSize)
	}
	if filepath.Ext(name) == ".conflist" {
		_, err := chain.Parse(data)
		return err
	}
	_, err := chain.ParsePlugin(data)
	return err
}

// planConfs decides, before anything changes, what happens to each config: written,
// left as it is, or refused because the file there is not ours.
func (r *run) planConfs(confs []conf) ([]confAction, error) {
	if len(confs) == 0 {
		return nil, nil
	}
	rec, err := readRecord(r.ConfDir)
	if err != nil {
		return nil, err
	}
	var plan []confAction
	var errs []error
	for _, c := range confs {
		a := confAction{conf: c, target: filepath.Join(r.ConfDir, c.name), write: true}
		old, err := readEntry(a.target, maxConfSize)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case statedir.IsForeign(err) && !r.Force:
			errs = append(errs, fmt.Errorf("refusing to replace %s: it is %s, not a config cni install wrote (use --force)", a.target, notRegular(err)))
			continue
		case statedir.IsForeign(err):
		case err != nil:
			errs = append(errs, fmt.Errorf("refusing to replace %s: %w", a.target, err))
			continue
		case bytes.Equal(old, c.data):
			a.write = false
		case !rec.holds(c.name, old) && !r.Force:
			errs = append(errs, fmt.Errorf("refusing to replace %s: not written by cni install (use --force)", a.target))
			continue
		}
		plan = append(plan, a)
	}
	return plan, errors.Join(errs...)
}

// writeConfs writes the planned configs. The record names the old and the new content
// of every config before any is replaced, so a run interrupted half-way still knows
// both as ours; it keeps only the new content once every config is in place.
func (r *run) writeConfs(plan []confAction) error {
	if len(plan) == 0 {
		return nil
	}
	if err := r.makeDir(r.ConfDir); err != nil {
		return err
	}
	// Entered after the plugin directory (installBinaries): every run takes the two
	// locks in one order, so that no two runs wait for each other.
	if err := r.enter(r.ConfDir); err != nil {
		return err
	}
	final, err := r.recordBoth(plan)
	if err != nil {
		return err
	}
	for _, a := range plan {
		if err := r.writeConf(a); err != nil {
			return err
		}
	}
	if r.DryRun {
		return nil
	}
	if err := syncDir(r.ConfDir); err != nil {
		return err
	}
	return final.write(r.ConfDir)
}

// recordBoth writes the record with the old and the new content of every planned
// config (not under DryRun), and returns the record with only the new content.
func (r *run) recordBoth(plan []confAction) (record, error) {
	rec, err := readRecord(r.ConfDir)
	if err != nil {
		return nil, err
	}
	// A shallow copy is enough: final gets a new slice for every planned name (set), and
	// rec's growing its own (add) never writes over the elements final still shares.
	final := maps.Clone(rec)
	for _, a := range plan {
		rec.add(a.name, a.data)
		final.set(a.name, a.data)
	}
	if r.DryRun {
		return final, nil
	}
	return final, rec.write(r.ConfDir)
}

// writeConf writes one planned config unless it holds its content already.
func (r *run) writeConf(a confAction) error {
	if !a.write {
		r.note("unchanged %s", a.target)
		return nil
	}
	return r.act(func() error { return wrap("write "+a.target, writeFile(a.target, bytes.NewReader(a.data), 0o644)) },
		"write %s (from %s)", a.target, a.src)
}

// uninstallConfs removes the configs recorded as ours (only those named by Confs, when
// given) whose content is still what cni wrote; a config someone changed stays.
func (r *run) uninstallConfs() error {
	if r.ConfDir == "" {
		return nil
	}
	if err := r.enter(r.ConfDir); err != nil {
		return err
	}
	rec, err := readRecord(r.ConfDir)
	if err != nil || len(rec) == 0 {
		return err
	}
	only := slices.Concat(r.Confs, r.OneExec)
	for _, name := range rec.names() {
		if len(only) > 0 && !slices.ContainsFunc(only, func(p string) bool { return filepath.Base(p) == name }) {
			continue
		}
		if err := r.uninstallConf(rec, name); err != nil {
			return err
		}
		delete(rec, name)
	}
	if r.DryRun {
		return nil
	}
	return rec.write(r.ConfDir)
}

// uninstallConf removes the config name of rec when its content is still what cni
// wrote.
func (r *run) uninstallConf(rec record, name string) error {
	p := filepath.Join(r.ConfDir, name)
	data, err := readEntry(p, maxConfSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case statedir.IsForeign(err):
		r.note("keep %s (it is %s, not a config cni install wrote)", p, notRegular(err))
	case err != nil:
		return err
	case rec.holds(name, data):
		return r.remove(p)
	default:
		r.note("keep %s (changed since cni install wrote it)", p)
	}
	return nil
}
