package vrf

import (
	"encoding/json"

	"github.com/cnikit/cni/internal/core/cnierror"
	"github.com/cnikit/cni/internal/plugins/lockedns"
	"github.com/cnikit/cni/internal/spec/skel"
)

// Config is the plugin's part of the network config: the reference's keys.
type Config struct {
	// VRFName is the VRF device the interface joins inside the container.
	VRFName string `json:"vrfname"`
	// Table is the VRF's routing table; 0 or absent lets the plugin pick a free one
	// when it creates the VRF, and accepts whatever table an existing VRF has.
	Table *int64 `json:"table,omitempty"`
}

// Plan is the validated config.
type Plan struct {
	Name  string
	Table uint32
}

// nameForDel reads the one thing DEL needs, the VRF's name. A name ADD refuses (none,
// not a string, not an interface name) is no VRF this plugin made: "" and DEL deletes
// nothing, where it used to fail for ever with the same refusal as ADD.
func nameForDel(req *skel.Request) (string, error) {
	var c struct {
		VRFName json.RawMessage `json:"vrfname"`
	}
	_ = json.Unmarshal(req.Config, &c) // the skel decoded it as an object already
	var name string
	if err := json.Unmarshal(c.VRFName, &name); err != nil {
		return "", cnierror.New(cnierror.CodeInvalidConfig, "vrfname: missing or not a string")
	}
	if name == "" {
		return "", cnierror.New(cnierror.CodeInvalidConfig, "vrfname: missing VRF name")
	}
	return name, skel.ValidateIfNameField("vrfname", name)
}

// load validates the config for ADD and CHECK.
func load(req *skel.Request) (*Plan, error) {
	conf, err := skel.LoadConfig[Config](req)
	if err != nil {
		return nil, err
	}
	if conf.VRFName == "" {
		return nil, cnierror.New(cnierror.CodeInvalidConfig, "vrfname: missing VRF name")
	}
	if err := skel.ValidateIfNameField("vrfname", conf.VRFName); err != nil {
		return nil, err
	}
	p := &Plan{Name: conf.VRFName}
	if t := conf.Table; t != nil && *t != 0 {
		if err := lockedns.CheckTable(*t); err != nil {
			return nil, err
		}
		p.Table = uint32(*t)
	}
	return p, nil
}
