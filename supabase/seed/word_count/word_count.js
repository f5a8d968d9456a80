// Count words, lines and characters: parameters as JSON on stdin, result as JSON on stdout.
let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const { text } = JSON.parse(input);
  const words = text.split(/\s+/).filter(Boolean).length;
  const lines = text === "" ? 0 : text.split("\n").length;
  console.log(JSON.stringify({ words, lines, characters: [...text].length }));
});
