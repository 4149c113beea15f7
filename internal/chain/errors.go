package chain

import (
	"fmt"

	"github.com/cnikit/cni/internal/core/cnierror"
)

// NotFoundError reports that no configuration file in Dir defines the network Name.
type NotFoundError struct {
	Dir  string
	Name string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("no net configuration with name %q in %s", e.Name, e.Dir)
}

// NoConfigsError reports a configuration directory holding no configuration file at all.
type NoConfigsError struct {
	Dir string
}

func (e *NoConfigsError) Error() string {
	return fmt.Sprintf("no net configurations found in %s", e.Dir)
}

// InvalidError reports a configuration that cannot be used: unreadable, oversized, not
// JSON, or missing a required key. File is empty for configurations parsed from bytes.
type InvalidError struct {
	File string
	Err  error
}

func (e *InvalidError) Error() string {
	if e.File == "" {
		return "invalid network configuration: " + e.Err.Error()
	}
	return fmt.Sprintf("invalid network configuration %s: %v", e.File, e.Err)
}

func (e *InvalidError) Unwrap() error { return e.Err }

// PluginError is the failure of one plugin of a chain. It names the plugin and the step,
// and wraps the plugin's error: a *cnierror.Error whenever the plugin ran, so that
// cnierror.Code and errors.As reach the plugin's own code (for example 50 from STATUS).
type PluginError struct {
	Type    string
	Network string
	// Step is the operation in the words libcni uses: add, check, delete, gc, status.
	Step string
	Err  error
}

func (e *PluginError) Error() string {
	return fmt.Sprintf("plugin type=%q name=%q failed (%s): %v", e.Type, e.Network, e.Step, e.Err)
}

func (e *PluginError) Unwrap() error { return e.Err }

// Code returns the CNI code of the plugin's error (0 when it carries none).
func (e *PluginError) Code() uint { return cnierror.Code(e.Err) }
