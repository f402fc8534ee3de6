/**
 * Whether a valid JSON text has an object with a member name twice. RFC 8259 leaves such a text's
 * meaning open and I-JSON (RFC 7493 §2.3) forbids it: refused, the echo of a body and what is stored
 * can never disagree.
 */
export function hasDuplicateKeys (text: string): boolean {
  // Per open object its names so far; null for an open array.
  const open: Array<Set<string> | null> = []
  let nameNext = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0x7b) { // {
      open.push(new Set())
      nameNext = true
    } else if (c === 0x5b) { // [
      open.push(null)
      nameNext = false
    } else if (c === 0x7d || c === 0x5d) { // } ]
      open.pop()
      nameNext = false
    } else if (c === 0x2c) { // ,
      nameNext = open.at(-1) != null
    } else if (c === 0x22) { // "
      let end = i + 1
      let escaped = false
      while (end < text.length && text.charCodeAt(end) !== 0x22) {
        if (text.charCodeAt(end) === 0x5c) {
          escaped = true
          end++
        }
        end++
      }
      if (nameNext) {
        // Names compare as the strings they stand for: "a" and "\u0061" are one name.
        const name: string = escaped ? JSON.parse(text.slice(i, end + 1)) : text.slice(i + 1, end)
        const names = open.at(-1) as Set<string>
        if (names.has(name)) return true
        names.add(name)
        nameNext = false
      }
      i = end
    }
  }
  return false
}
