// Package invlog is the invocation log: one JSON line per plugin invocation (what ran,
// for which container, how long each step took, what it returned or why it failed),
// appended to a file that many plugin processes share and that rotates by size. It is
// off unless a plugin's config holds a "log" object or the node's environment sets
// CNI_LOG_FILE; off, it costs nothing (skel decides that from what it parses anyway).
// This package holds the configuration, the line's shape and redaction, the
// concurrent appender with its rotation, and the reader of a log and its rotated files.
package invlog

import (
	"bytes"
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strings"

	"github.com/cnikit/cni/internal/core/cnierror"
)

// The environment variables that turn the log on for every plugin of a node (libcni
// hands the runtime's environment to every plugin).
const (
	EnvFile  = "CNI_LOG_FILE"
	EnvLevel = "CNI_LOG_LEVEL"
)

// The levels: info writes what every line needs, debug adds the values of args and
// runtimeConfig (token-like strings still redacted) and the result's routes.
const (
	LevelInfo  = "info"
	LevelDebug = "debug"
)

// Defaults of the rotation: a log of 10 MB and 5 rotated files beside it.
const (
	DefaultMaxSizeMB = 10
	DefaultMaxFiles  = 5
	// maxRotated bounds maxFiles: rotation renames each file once.
	maxRotated = 100
)

// Config is the "log" object of a plugin config, or what the environment says.
type Config struct {
	// File is the log's path; empty means no log.
	File string `json:"file,omitempty"`
	// Level is "info" (the default) or "debug".
	Level string `json:"level,omitempty"`
	// MaxSizeMB is the size at which the file is rotated (fractions allowed); 0 means
	// DefaultMaxSizeMB.
	MaxSizeMB float64 `json:"maxSizeMB,omitempty"`
	// MaxFiles is how many rotated files (FILE.1 newest ... FILE.N oldest) are kept; 0
	// means DefaultMaxFiles.
	MaxFiles int `json:"maxFiles,omitempty"`
}

// On reports whether c names a file to log to.
func (c *Config) On() bool { return c != nil && c.File != "" }

// Debug reports whether c logs at debug level.
func (c *Config) Debug() bool { return c.Level == LevelDebug }

// MaxBytes is the size at which the file rotates.
func (c *Config) MaxBytes() int64 {
	mb := c.MaxSizeMB
	if mb <= 0 {
		mb = DefaultMaxSizeMB
	}
	return max(int64(mb*(1<<20)), 1)
}

// Rotated is how many rotated files are kept.
func (c *Config) Rotated() int {
	if c.MaxFiles <= 0 {
		return DefaultMaxFiles
	}
	return c.MaxFiles
}

// keysText names the keys of a "log" object, for messages.
const keysText = `"file","level","maxSizeMB","maxFiles"`

// knownKey reports whether k is a key of a "log" object, matched as encoding/json
// matches Config's tags: case-insensitively.
func knownKey(k string) bool {
	return slices.ContainsFunc([]string{"file", "level", "maxSizeMB", "maxFiles"}, func(name string) bool { return strings.EqualFold(name, k) })
}

// ParseConfig reads a config's "log" object; absent or null gives nil. A value of the
// wrong shape is an invalid config (code 7) naming the field.
func ParseConfig(raw json.RawMessage) (*Config, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, cnierror.Invalid("log: must be an object {%s}: %v", keysText, err)
	}
	// A misspelled key ("path", "maxSize") would otherwise leave the log silently off:
	// the object is ours, so the typo is refused like a bad value.
	for _, k := range Keys(raw) {
		if !knownKey(k) {
			return nil, cnierror.Invalid("log.%s: unknown key (the log object takes %s)", k, keysText)
		}
	}
	if err := c.validate("log.", cnierror.CodeInvalidConfig); err != nil {
		return nil, err
	}
	return &c, nil
}

// FromEnv reads CNI_LOG_FILE and CNI_LOG_LEVEL (already looked up by the caller); a bad
// level is a bad environment variable (code 4). No file gives nil.
func FromEnv(file, level string) (*Config, error) {
	if file == "" && level == "" {
		return nil, nil
	}
	c := Config{File: file, Level: level}
	if err := c.validate("", cnierror.CodeInvalidEnv); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Config) validate(prefix string, code uint) error {
	field := func(name string) string {
		if prefix == "" {
			return map[string]string{"level": EnvLevel, "file": EnvFile}[name]
		}
		return prefix + name
	}
	switch c.Level {
	case "", LevelInfo, LevelDebug:
	default:
		return cnierror.Newf(code, "%s: unknown level %q (want %q or %q)", field("level"), c.Level, LevelInfo, LevelDebug)
	}
	if strings.ContainsFunc(c.File, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return cnierror.Newf(code, "%s: control character in the path", field("file"))
	}
	if c.MaxSizeMB < 0 || math.IsInf(c.MaxSizeMB, 0) || math.IsNaN(c.MaxSizeMB) || c.MaxSizeMB > 1<<20 {
		return cnierror.Newf(code, "%s: must be a positive number of megabytes, got %v", field("maxSizeMB"), c.MaxSizeMB)
	}
	if c.MaxFiles < 0 || c.MaxFiles > maxRotated {
		return cnierror.Newf(code, "%s: must be between 1 and %d, got %d", field("maxFiles"), maxRotated, c.MaxFiles)
	}
	return nil
}

// Resolve is the configuration an invocation logs with: the config's own "log" object
// key by key over what the environment (or the calling plugin, for a delegate or a chain
// child) says, the config winning. Nil when no file results.
func Resolve(conf, inherited *Config) *Config {
	if conf == nil {
		if inherited.On() {
			return inherited
		}
		return nil
	}
	out := *conf
	if inherited != nil {
		out.File = cmp.Or(out.File, inherited.File)
		out.Level = cmp.Or(out.Level, inherited.Level)
		out.MaxSizeMB = cmp.Or(out.MaxSizeMB, inherited.MaxSizeMB)
		out.MaxFiles = cmp.Or(out.MaxFiles, inherited.MaxFiles)
	}
	if !out.On() {
		return nil
	}
	return &out
}
