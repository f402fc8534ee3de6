/** The bench's median (bench/median.ts), from which every figure and ratio it reports comes. */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { median } from '../../bench/median.js'

test('the median of an odd count is the middle value, whatever the order', () => {
  assert.equal(median([9, 1, 5]), 5)
})

test('the median of two rounds is their mean, not the larger', () => {
  assert.equal(median([0.8, 1.2]), 1)
  assert.equal(median([4, 1, 3, 2]), 2.5)
})

test('the median of no rounds is an error, not a number', () => {
  assert.throws(() => median([]), /no numbers/)
})
