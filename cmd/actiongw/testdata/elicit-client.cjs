// elicit-client.cjs: an MCP client on the TypeScript SDK that starts a
// server over stdio, answers its elicitation requests from a script, and
// prints what happened as JSON lines on stdout. TestServeApprovalsTypeScript
// runs it with NODE_PATH set to npm's global root.
//
//   node elicit-client.cjs SPEC
//
// SPEC is JSON:
//   command, args  the server to start; it gets this process's environment
//   elicitation    whether the client declares form elicitation
//   answers        one per question, in order: an ElicitResult such as
//                  {"action":"accept","content":{"decision":"approve"}},
//                  {"action":"decline"}, {"action":"cancel"}, or "wait":
//                  no answer; the client ends only once the server has
//                  withdrawn the question
//   calls          the tool calls to make, in order: {"name","arguments"}
//
// Output lines: {"protocol":V} once connected, {"question":MESSAGE} for
// each question, {"withdrawn":MESSAGE} for one the server cancelled, and
// {"result":CallToolResult} for each call.
'use strict';

const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const { ElicitRequestSchema } = require('@modelcontextprotocol/sdk/types.js');

const print = (v) => process.stdout.write(JSON.stringify(v) + '\n');

async function main() {
  const spec = JSON.parse(process.argv[2]);
  const transport = new StdioClientTransport({
    command: spec.command,
    args: spec.args,
    env: process.env, // the test's keyring service and D-Bus address
    stderr: 'inherit',
  });
  // The client tells a stdio transport nothing of the version it agreed
  // on; it hands it to transports that want it (HTTP's header).
  let protocol = '';
  transport.setProtocolVersion = (v) => { protocol = v; };

  const capabilities = spec.elicitation ? { elicitation: { form: {} } } : {};
  const client = new Client({ name: 'elicit-client', version: '1' }, { capabilities });
  const waiting = []; // the questions left unanswered, until withdrawn
  if (spec.elicitation) {
    const answers = [...spec.answers];
    client.setRequestHandler(ElicitRequestSchema, (req, extra) => {
      const message = req.params.message;
      print({ question: message });
      const answer = answers.shift();
      if (answer === undefined) {
        throw new Error('no answer left for: ' + message);
      }
      if (answer !== 'wait') {
        return answer;
      }
      // The cancellation may have come with the request, before the
      // SDK called this handler: the signal is then aborted already.
      const withdrawn = new Promise((resolve) => {
        if (extra.signal.aborted) {
          resolve();
        } else {
          extra.signal.addEventListener('abort', resolve);
        }
      }).then(() => print({ withdrawn: message }));
      waiting.push(withdrawn);
      return withdrawn.then(() => { throw new Error('withdrawn'); });
    });
  }

  await client.connect(transport);
  print({ protocol });
  // With the tools listed, the SDK checks each result's structured
  // content against the tool's output schema.
  await client.listTools();
  for (const call of spec.calls) {
    // A person may take minutes; the test bounds the whole run.
    const result = await client.callTool(call, undefined, { timeout: 10 * 60 * 1000 });
    print({ result });
  }
  // The server withdraws a question it stopped waiting for, though
  // perhaps only after the call's result.
  await Promise.all(waiting);
  await client.close();
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write('elicit-client: ' + (err && err.stack ? err.stack : err) + '\n');
    process.exit(1);
  },
);
