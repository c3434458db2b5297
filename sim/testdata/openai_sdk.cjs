// Drives the built-in server with the official OpenAI Node SDK, an
// independent client: its stream parser, error classes and retry logic are
// OpenAI's, not ours. Run by TestOpenAINodeSDK (sdk_node_test.go) as
//   node openai_sdk.cjs BASE_URL MODEL
// with OPENAI_NODE_MODULES naming the node_modules folder that holds
// `openai`. It prints one JSON line of findings and exits non-zero on the
// first failed check.
const path = require("path");
const OpenAI = require(path.join(process.env.OPENAI_NODE_MODULES, "openai"));

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 20000 });

function check(ok, what) {
  if (!ok) {
    console.error("FAIL: " + what);
    process.exit(1);
  }
}

async function main() {
  const out = {};

  // A chat stream with usage: finish_reason on the last token's chunk,
  // then a usage chunk with no choices.
  const stream = await client.chat.completions.create({
    model,
    messages: [{ role: "user", content: "hi" }],
    max_tokens: 5,
    stream: true,
    stream_options: { include_usage: true },
  });
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  const withChoices = chunks.filter((c) => c.choices.length > 0);
  const last = withChoices[withChoices.length - 1];
  check(withChoices[0].choices[0].delta.role === "assistant", "first chunk carries the role");
  check(last.choices[0].finish_reason === "length", "finish_reason length on the last chunk");
  check(last.choices[0].delta.content && last.choices[0].delta.content.length > 0, "the last chunk carries a token, not an empty finish");
  const usage = chunks[chunks.length - 1].usage;
  check(usage && usage.completion_tokens === 5, "usage chunk counts 5 tokens");
  out.chat_chunks = chunks.length;

  // The SDK's own accumulator.
  const runner = client.chat.completions.stream({
    model,
    messages: [{ role: "user", content: "hello" }],
    max_tokens: 4,
  });
  const final = await runner.finalChatCompletion();
  check(final.choices[0].finish_reason === "length", "accumulated finish_reason");
  check(final.choices[0].message.content.length > 0, "accumulated content");

  // Completions, not streamed.
  const text = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 3 });
  check(text.choices[0].text.length > 0 && text.usage.completion_tokens === 3, "completion of 3 tokens");

  // Errors: the SDK reads vLLM's {"error": {...}} into its error classes.
  try {
    await client.chat.completions.create({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 1000000 });
    check(false, "context overflow refused");
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError, "context overflow is a BadRequestError, got " + e.constructor.name);
    check(e.status === 400 && /maximum context length/.test(e.message), "400 with vLLM's message, got: " + e.message);
    check(e.type === "BadRequestError" && e.code === 400, "type and code from the body, got " + e.type + " " + e.code);
    out.overflow = e.message;
  }
  try {
    await client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "hi" }], max_tokens: 1 });
    check(false, "unknown model refused");
  } catch (e) {
    check(e instanceof OpenAI.NotFoundError, "unknown model is a NotFoundError, got " + e.constructor.name);
    check(/does not exist/.test(e.message), "404 with vLLM's message, got: " + e.message);
    out.unknown_model = e.message;
  }
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error("FAIL: " + (e && e.stack ? e.stack : e));
  process.exit(1);
});
