// Package v20170312 stands in for Tencent Cloud's VPC API client in the lab's build of
// flanneld: the module proxy does not serve the SDK, and the lab runs the vxlan backend,
// which never calls it. Every call fails, saying so, should a config ever pick the
// tencent-vpc backend.
package v20170312

import "errors"

var errStandIn = errors.New("the Tencent VPC API is not in this build of flanneld (tools/flanneld)")

// Client is the API client; this one has no connection.
type Client struct{}

// NewClientWithSecretId fails: there is no API here.
func NewClientWithSecretId(secretID, secretKey, region string) (*Client, error) {
	return nil, errStandIn
}

// Filter selects route tables.
type Filter struct {
	Name   *string
	Values []*string
}

// Route is one route of a route table.
type Route struct {
	DestinationCidrBlock *string
	GatewayType          *string
	GatewayId            *string
	RouteId              *uint64
	RouteType            *string
	Enabled              *bool
}

// RouteTable is a VPC's route table.
type RouteTable struct {
	RouteTableId *string
	RouteSet     []*Route
}

// DescribeRouteTablesRequest asks for the route tables a filter selects.
type DescribeRouteTablesRequest struct{ Filters []*Filter }

// DescribeRouteTablesResponse holds them.
type DescribeRouteTablesResponse struct {
	Response *struct{ RouteTableSet []*RouteTable }
}

// NewDescribeRouteTablesRequest is an empty request.
func NewDescribeRouteTablesRequest() *DescribeRouteTablesRequest {
	return &DescribeRouteTablesRequest{}
}

// DescribeRouteTables fails: there is no API here.
func (c *Client) DescribeRouteTables(*DescribeRouteTablesRequest) (*DescribeRouteTablesResponse, error) {
	return nil, errStandIn
}

// RoutesRequest names routes of one table, to create or delete.
type RoutesRequest struct {
	RouteTableId *string
	Routes       []*Route
}

// DeleteRoutesRequest and CreateRoutesRequest are the two uses of RoutesRequest.
type (
	DeleteRoutesRequest = RoutesRequest
	CreateRoutesRequest = RoutesRequest
)

// NewDeleteRoutesRequest is an empty request.
func NewDeleteRoutesRequest() *DeleteRoutesRequest { return &RoutesRequest{} }

// NewCreateRoutesRequest is an empty request.
func NewCreateRoutesRequest() *CreateRoutesRequest { return &RoutesRequest{} }

// DeleteRoutes fails: there is no API here.
func (c *Client) DeleteRoutes(*DeleteRoutesRequest) (struct{}, error) { return struct{}{}, errStandIn }

// CreateRoutes fails: there is no API here.
func (c *Client) CreateRoutes(*CreateRoutesRequest) (struct{}, error) { return struct{}{}, errStandIn }
