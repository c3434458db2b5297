// Ground truth for the tests of the tokenizer package; see README.md.
// Usage: node gt.js GPT2_TOKENIZER_JSON > gt.json
const {Tokenizer} = require('tokenizers');            // Hugging Face tokenizers 0.23.2 (Rust, via napi)
const gpt3enc = require('gpt-3-encoder');              // 1.1.4, OpenAI's GPT-2 encoder ported to JS
const o200k = require('gpt-tokenizer/cjs/encoding/o200k_base'); // gpt-tokenizer 4.0.0
const fs = require('fs');
const path = require('path');
const td = path.join(__dirname, '..');
const texts = require('./texts.js');
const long = {english: fs.readFileSync(path.join(td, 'english.txt'), 'utf8'), cjk: fs.readFileSync(path.join(td, 'cjk.txt'), 'utf8')};
const tinyTexts = ["hello world", "abc", " abc", "xyzabc", "abcabc abc", "hello-world--x", "a1234b 56", "-x- -", "word words sword word_ x", "[mask] x  [mask]  y[mask]", "<sep><sep><sep>", "\ufb01x fix \ufb01", "he-llo 12-34", "   ", "\u2460\u00bd\u00b2"];
(async () => {
  const enc = async (t, s) => (await t.encode(s, null, {addSpecialTokens: false})).getIds();
  const qwen = Tokenizer.fromFile(path.join(td, '..', '..', '..', 'shared', 'tokenizers', 'qwen3', 'tokenizer.json'));
  const gpt2 = Tokenizer.fromFile(process.argv[2]);
  const out = {cases: [], long: {}, tiny: []};
  for (const [name, text] of texts) {
    const q = await enc(qwen, text), g = await enc(gpt2, text);
    const c = {name, text, qwen3: q, gpt2: g, o200k: o200k.encode(text, {disallowedSpecial: new Set()})};
    c.qwen3Decoded = await qwen.decode(q, false);
    c.gpt2Decoded = await gpt2.decode(g, false);
    c.gpt3encoderAgrees = JSON.stringify(gpt3enc.encode(text)) === JSON.stringify(g);
    c.o200kDecoded = o200k.decode(c.o200k);
    out.cases.push(c);
  }
  for (const [k, v] of Object.entries(long)) {
    out.long[k] = {qwen3: (await enc(qwen, v)).length, gpt2: (await enc(gpt2, v)).length, gpt3encoder: gpt3enc.encode(v).length, o200k: o200k.encode(v, {disallowedSpecial: new Set()}).length};
  }
  const base = JSON.parse(fs.readFileSync(path.join(td, 'tiny', 'tokenizer.json'), 'utf8'));
  const variants = {
    base: j => j,
    no_ignore_merges: j => { j.model.ignore_merges = false; return j; },
    removed: j => { j.pre_tokenizer.pretokenizers[1].behavior = 'Removed'; return j; },
    isolated: j => { j.pre_tokenizer.pretokenizers[1].behavior = 'Isolated'; return j; },
    merged_with_previous: j => { j.pre_tokenizer.pretokenizers[1].behavior = 'MergedWithPrevious'; return j; },
    contiguous: j => { j.pre_tokenizer.pretokenizers[1].behavior = 'Contiguous'; return j; },
    inverted: j => { j.pre_tokenizer.pretokenizers[1].invert = true; return j; },
    individual_digits: j => { j.pre_tokenizer.pretokenizers[0].individual_digits = true; return j; },
    no_prefix_space: j => { j.pre_tokenizer.pretokenizers[2].add_prefix_space = false; return j; },
    no_regex: j => { j.pre_tokenizer.pretokenizers[2].use_regex = false; return j; },
    nfc: j => { j.normalizer = {type: 'NFC'}; return j; },
  };
  for (const [vname, f] of Object.entries(variants)) {
    const t = Tokenizer.fromString(JSON.stringify(f(JSON.parse(JSON.stringify(base)))));
    const ids = [];
    for (const s of tinyTexts) ids.push(await enc(t, s));
    out.tiny.push({variant: vname, ids});
  }
  out.tinyTexts = tinyTexts;
  console.log(JSON.stringify(out));
})();
