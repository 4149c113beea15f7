package dhcpconf

// NetConf is the shape dhcp decodes its network config into. It is exported for the
// documentation test (internal/dispatch) that finds every key by reflection and
// requires docs/plugins/dhcp.md to name it.
type NetConf = netJSON
