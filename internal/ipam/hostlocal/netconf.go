package hostlocal

// NetConf is the shape host-local decodes its network config into. It is exported for the
// documentation test (internal/dispatch) that finds every key by reflection and
// requires docs/plugins/host-local.md to name it.
type NetConf = netJSON
