package static

// NetConf is the shape static decodes its network config into. It is exported for the
// documentation test (internal/dispatch) that finds every key by reflection and
// requires docs/plugins/static.md to name it.
type NetConf = netJSON
