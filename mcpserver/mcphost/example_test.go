package mcphost_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/mcpserver/mcphost"
)

func Example() {
	ctx := context.Background()
	cmd := exec.Command("actiongw", "serve")
	cmd.Stderr = os.Stderr // the server's logs
	c, err := mcphost.Start(ctx, cmd, mcphost.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	if _, err := c.Initialize(ctx); err != nil {
		fmt.Println(err)
		return
	}
	res, err := c.CallTool(ctx, "list_targets", map[string]any{}, func(p mcp.ProgressNotificationParams) {
		fmt.Printf("progress %.0f/%.0f\n", p.Progress, p.Total)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	fmt.Printf("%+v\n", c.Metrics())
}
