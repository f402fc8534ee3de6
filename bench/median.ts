/** The middle value; with an even count, the mean of the two middle values, so that two rounds give their mean, not the larger. */
export function median (numbers: number[]): number {
  if (numbers.length === 0) throw new Error('the median of no numbers')
  const sorted = [...numbers].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}
