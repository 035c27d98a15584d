// A hook written in JavaScript (built with componentize-js) that ends its calls on demand.
// on-task-start looks at the task id:
//   "!trap"  writes to stdout, then throws an Error object (not a string): the guest traps
//   "!loop"  spins until its fuel or time runs out (or Ctrl-C stops it)
//   "!grow"  allocates 1 MiB buffers until memory runs out
//   "!read"  calls read-messages(none, 100) and returns "<count>|<total>"
//   anything else is echoed back, after a line on stdout and one on stderr
import { readMessages } from "murmur:conversation/read@0.1.0";

function spin() {
  let x = 0;
  for (;;) {
    x = (x * 31 + 7) | 0;
  }
}

function grow() {
  const keep = [];
  for (;;) {
    keep.push(new Uint8Array(1 << 20));
  }
}

export const handlers = {
  onTaskStart(event) {
    const id = event.taskId;
    if (id === "!trap") {
      console.log("exit_hook: about to throw");
      throw new Error("exit_hook says boom");
    }
    if (id === "!loop") spin();
    if (id === "!grow") grow();
    if (id === "!read") {
      const page = readMessages(undefined, 100);
      return `${page.messages.length}|${page.total}`;
    }
    console.log(`exit_hook: echo ${id}`);
    console.error("exit_hook: on stderr");
    return id;
  },
  onCompact(messages) {
    return messages;
  },
};
